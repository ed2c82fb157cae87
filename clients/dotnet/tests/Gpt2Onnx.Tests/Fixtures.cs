// The committed fixtures (fixtures/ at the repository root, made by scripts/make_fixtures.py) and what
// fixtures/expectations.json says a consumer must reproduce.
using System.Text.Json;

namespace Gpt2Onnx.Tests;

internal static class Fixtures
{
    public static IEnumerable<object[]> Exports() => [["pydocs-micro-fp32"], ["pydocs-micro-int4"]];

    public static string Dir()
    {
        for (var dir = new DirectoryInfo(AppContext.BaseDirectory); dir is not null; dir = dir.Parent)
        {
            string candidate = Path.Combine(dir.FullName, "fixtures", "expectations.json");
            if (File.Exists(candidate))
            {
                return Path.GetDirectoryName(candidate)!;
            }
        }
        throw new FileNotFoundException("fixtures/expectations.json not found above " + AppContext.BaseDirectory);
    }

    public static string Folder(string name) => Path.Combine(Dir(), name);

    public static JsonElement Expectations(string name)
    {
        using JsonDocument doc = JsonDocument.Parse(File.ReadAllText(Path.Combine(Dir(), "expectations.json")));
        return doc.RootElement.GetProperty("exports").GetProperty(name).Clone();
    }

    public static long[] Longs(JsonElement e) => e.EnumerateArray().Select(x => x.GetInt64()).ToArray();

    public static float[] Floats(JsonElement e) => e.EnumerateArray().Select(x => x.GetSingle()).ToArray();
}

/// <summary>A copy of one fixture folder in a fresh temporary directory, deleted on Dispose.</summary>
internal sealed class TempExport : IDisposable
{
    public TempExport(string name)
    {
        Path = System.IO.Path.Combine(System.IO.Path.GetTempPath(), $"gpt2onnx-{Guid.NewGuid():N}");
        Directory.CreateDirectory(Path);
        foreach (string file in Directory.GetFiles(Fixtures.Folder(name)))
        {
            System.IO.File.Copy(file, System.IO.Path.Combine(Path, System.IO.Path.GetFileName(file)));
        }
    }

    public string Path { get; }

    public string File(string name) => System.IO.Path.Combine(Path, name);

    public void Dispose() => Directory.Delete(Path, recursive: true);
}
