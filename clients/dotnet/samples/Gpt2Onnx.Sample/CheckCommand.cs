// gpt2-onnx-dotnet check: the folder's golden.json through ONNX Runtime (GoldenCheck) and, with --genai, through
// onnxruntime-genai's C# API (GenAiPath).
namespace Gpt2Onnx.Sample;

internal static class CheckCommand
{
    public static readonly string[] Flags = ["--provider", "--device-id", "--weights"];
    public static readonly string[] Switches = ["--genai", "--no-batch"];

    public static int Execute(CommandLine line)
    {
        string provider = line.Text("--provider") ?? "cpu";
        string weights = line.Text("--weights") ?? "shared-unpacked";
        if (weights is not ("shared-unpacked" or "per-session"))
        {
            throw new UsageException($"--weights takes shared-unpacked or per-session, not '{weights}'");
        }
        var options = new Gpt2ModelOptions
        {
            Provider = provider, DeviceId = (int)(line.WholeNumber("--device-id") ?? 0),
            ShareWeights = weights == "shared-unpacked",
        };
        using Gpt2Model model = Gpt2Model.Open(line.Folder, options);  // refuses a missing, changed or foreign folder
        Manifest manifest = model.Manifest;
        Golden golden = Golden.Read(Path.Combine(line.Folder, "golden.json"));
        Console.WriteLine($"export {line.Folder}: {manifest.NLayer} layers, {manifest.NHead} heads, d={manifest.NEmbd}, "
            + $"vocab {manifest.VocabSize}, opset {manifest.Opset} (needs ONNX Runtime >= {manifest.MinOnnxRuntime}), "
            + $"provider {provider}; {manifest.Files.Count} files match manifest.json (size + sha256)");
        var report = new Report();
        for (int i = 0; i < golden.Cases.Count; i++)  // the folder's own vocab.json + merges.txt
        {
            report.Add(model.Tokenizer.Encode(golden.Cases[i].Prompt).SequenceEqual(golden.Cases[i].InputIds),
                $"case {i}: the folder's tokenizer gives the golden prompt ids");
        }
        ExportSessions sessions = model.Sessions;
        Console.WriteLine(sessions.SharedWeights is { } shared
            ? $"weights: one map of {manifest.WeightsFile} ({shared.TensorCount} tensors, "
              + $"{shared.MappedBytes / (1024 * 1024)} MiB) shared by both sessions, prepacking off"
            : "weights: loaded and prepacked by ONNX Runtime for each session");
        Console.WriteLine($"memory: working set {Environment.WorkingSet / (1024 * 1024)} MiB with both sessions loaded");
        GoldenCheck.Run(sessions, golden, !line.Has("--no-batch"), report);
        if (golden.Cases.Count > 0)  // case 0's continuation as text, through the library's generate loop
        {
            GenerationResult result = model.Generate(golden.Cases[0].Prompt,
                new GenerationOptions { MaxNewTokens = Math.Max(1, golden.Cases[0].GreedyIds.Length) });
            Console.WriteLine($"\"{golden.Cases[0].Prompt}\" → \"{result.Text}\" ({result.FinishReason})");
        }
        if (line.Has("--genai"))
        {
            int eos = manifest.EosTokenId ?? throw new ExportFolderException("manifest.json names no eos_token_id");
            GenAiPath.Run(line.Folder, provider, golden, eos, report);
        }
        Console.WriteLine($"golden check {(report.Failed == 0 ? "passed" : "FAILED")}: {report.Passed} comparisons ok, "
            + $"{report.Failed} failed");
        return report.Failed == 0 ? 0 : 1;
    }
}
