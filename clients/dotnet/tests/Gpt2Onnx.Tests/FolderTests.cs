// A missing, changed or foreign folder is refused before the first token, with a typed exception.
using System.Text.Json.Nodes;
using Xunit;

namespace Gpt2Onnx.Tests;

public class FolderTests
{
    [Fact]
    public void TheCommittedFixturesPassTheirChecks()
    {
        foreach (object[] export in Fixtures.Exports())
        {
            string folder = Fixtures.Folder((string)export[0]);
            Manifest manifest = Manifest.Read(folder);
            FolderCheck.Verify(folder, manifest);  // throws on any difference
            Assert.Contains("vocab.json", manifest.Files.Keys);
            Assert.Contains(manifest.WeightsFile, manifest.Files.Keys);
        }
    }

    [Fact]
    public void AChangedByteIsRefused()
    {
        using var copy = new TempExport("pydocs-micro-fp32");
        byte[] bytes = File.ReadAllBytes(copy.File("vocab.json"));
        bytes[bytes.Length / 2] ^= 0x01;  // same size, other sha256
        File.WriteAllBytes(copy.File("vocab.json"), bytes);
        var e = Assert.Throws<ChangedFileException>(() => Gpt2Model.Open(copy.Path));
        Assert.Equal("vocab.json", e.File);
        Assert.Contains("sha256", e.Message);
    }

    [Fact]
    public void ATruncatedWeightsFileIsRefused()
    {
        using var copy = new TempExport("pydocs-micro-int4");
        string weights = copy.File(Manifest.Read(copy.Path).WeightsFile);
        using (var stream = new FileStream(weights, FileMode.Open))
        {
            stream.SetLength(stream.Length - 4);
        }
        var e = Assert.Throws<ChangedFileException>(() => Gpt2Model.Open(copy.Path));
        Assert.Contains("bytes", e.Message);
    }

    [Fact]
    public void AMissingFileIsRefused()
    {
        using var copy = new TempExport("pydocs-micro-fp32");
        File.Delete(copy.File("merges.txt"));
        var e = Assert.Throws<MissingFileException>(() => Gpt2Model.Open(copy.Path));
        Assert.Equal("merges.txt", e.File);
    }

    [Fact]
    public void AFolderWithoutManifestIsNotAnExport()
    {
        using var copy = new TempExport("pydocs-micro-fp32");
        File.Delete(copy.File("manifest.json"));
        Assert.Throws<NotAnExportException>(() => Gpt2Model.Open(copy.Path));
    }

    [Fact]
    public void AForeignManifestIsNotAnExport()
    {
        using var copy = new TempExport("pydocs-micro-fp32");
        JsonNode manifest = JsonNode.Parse(File.ReadAllText(copy.File("manifest.json")))!;
        manifest["format"] = "some-other-tool";
        File.WriteAllText(copy.File("manifest.json"), manifest.ToJsonString());
        Assert.Throws<NotAnExportException>(() => Gpt2Model.Open(copy.Path));
    }

    [Fact]
    public void ANewerSchemaIsNotAnExportThisLibraryReads()
    {
        using var copy = new TempExport("pydocs-micro-fp32");
        JsonNode manifest = JsonNode.Parse(File.ReadAllText(copy.File("manifest.json")))!;
        manifest["schema_version"] = 99;
        File.WriteAllText(copy.File("manifest.json"), manifest.ToJsonString());
        Assert.Throws<NotAnExportException>(() => Gpt2Model.Open(copy.Path));
    }

    [Fact]
    public void AFileNameLeavingTheFolderIsRefused()
    {
        using var copy = new TempExport("pydocs-micro-fp32");
        JsonNode manifest = JsonNode.Parse(File.ReadAllText(copy.File("manifest.json")))!;
        manifest["files"]!["../elsewhere"] = new JsonObject { ["size"] = 1, ["sha256"] = "00" };
        File.WriteAllText(copy.File("manifest.json"), manifest.ToJsonString());
        Assert.Throws<NotAnExportException>(() => Gpt2Model.Open(copy.Path));
    }

    [Theory]
    [InlineData("a tensor the graph lacks")]
    [InlineData("a KV input left out")]
    public void AManifestTheGraphsDoNotMatchIsRefusedOnceTheSessionsAreOpen(string change)
    {
        // The checks that need both sessions (float32: they read one map of the weights) refuse the folder; the
        // sessions and the map are disposed before the exception leaves ExportSessions.
        using var copy = new TempExport("pydocs-micro-fp32");
        JsonNode manifest = JsonNode.Parse(File.ReadAllText(copy.File("manifest.json")))!;
        JsonArray inputs = manifest["graphs"]!["decode"]!["inputs"]!.AsArray();
        if (change == "a tensor the graph lacks")
        {
            inputs.Add(new JsonObject { ["name"] = "past_key_values.99.key" });
        }
        else
        {
            inputs.RemoveAt(inputs.Count - 1);
        }
        File.WriteAllText(copy.File("manifest.json"), manifest.ToJsonString());
        var e = Assert.Throws<ExportFolderException>(() => Gpt2Model.Open(copy.Path));
        Assert.Contains(change == "a tensor the graph lacks" ? "past_key_values.99.key" : "pair up", e.Message);
    }

    [Fact]
    public void ANonExistentFolderIsRefused()
    {
        string nowhere = Path.Combine(Path.GetTempPath(), $"gpt2onnx-absent-{Guid.NewGuid():N}");
        Assert.Throws<MissingFileException>(() => Gpt2Model.Open(nowhere));
    }

    [Fact]
    public void AllAreExportFolderExceptions()
    {
        Assert.True(typeof(ExportFolderException).IsAssignableFrom(typeof(MissingFileException)));
        Assert.True(typeof(ExportFolderException).IsAssignableFrom(typeof(ChangedFileException)));
        Assert.True(typeof(ExportFolderException).IsAssignableFrom(typeof(NotAnExportException)));
    }

    [Fact]
    public void EndOfTextIsOneSpecialToken()
    {
        using Gpt2Model model = Gpt2Model.Open(Fixtures.Folder("pydocs-micro-fp32"));
        Assert.Equal(new long[] { model.EndOfTextId }, model.Tokenizer.Encode("<|endoftext|>"));
    }
}
