// gpt2-onnx C# sample on the Gpt2Onnx library: open an export folder (manifest, size + sha256 of every file, the
// folder's own tokenizer), check it against its golden.json with ONNX Runtime (InferenceSession, OrtValue, IO
// binding), print one greedy continuation, and optionally run the same prompts through onnxruntime-genai (--genai).
//
//   dotnet run -c Release -- EXPORT_FOLDER [--provider cpu|cuda] [--device-id N] [--no-batch] [--genai]
//                            [--weights shared-unpacked|per-session]
//
// Exit status: 0 all match, 1 a mismatch, 2 bad arguments or export folder, 3 ONNX Runtime could not run it.
using Microsoft.ML.OnnxRuntime;

namespace Gpt2Onnx.Sample;

public static class Program
{
    private const string Usage =
        "usage: Gpt2OnnxSample EXPORT_FOLDER [--provider cpu|cuda] [--device-id N] [--no-batch] [--genai] "
        + "[--weights shared-unpacked|per-session]";

    public static int Main(string[] args)
    {
        string? folder = null;
        string provider = "cpu";
        int deviceId = 0;
        bool batch = true, genai = false, shareWeights = true;
        for (int i = 0; i < args.Length; i++)
        {
            switch (args[i])
            {
                case "--provider" when i + 1 < args.Length: provider = args[++i]; break;
                case "--device-id" when i + 1 < args.Length && int.TryParse(args[i + 1], out deviceId): i++; break;
                case "--no-batch": batch = false; break;
                case "--genai": genai = true; break;
                case "--weights" when i + 1 < args.Length && args[i + 1] is "shared-unpacked" or "per-session":
                    shareWeights = args[++i] == "shared-unpacked";
                    break;
                case var a when !a.StartsWith('-') && folder is null: folder = a; break;
                default:
                    Console.Error.WriteLine($"{Usage}\nerror: unexpected argument '{args[i]}'");
                    return 2;
            }
        }
        if (folder is null)
        {
            Console.Error.WriteLine($"{Usage}\nerror: no export folder given");
            return 2;
        }
        try
        {
            return Run(folder, provider, deviceId, batch, genai, shareWeights);
        }
        catch (ExportFolderException e)
        {
            Console.Error.WriteLine($"error: {e.Message}");
            return 2;
        }
        catch (OnnxRuntimeException e)
        {
            Console.Error.WriteLine($"error: ONNX Runtime: {e.Message}");
            return 3;
        }
        catch (Microsoft.ML.OnnxRuntimeGenAI.OnnxRuntimeGenAIException e)
        {
            Console.Error.WriteLine($"error: onnxruntime-genai: {e.Message}");
            return 3;
        }
    }

    private static int Run(string folder, string provider, int deviceId, bool batch, bool genai, bool shareWeights)
    {
        var options = new Gpt2ModelOptions { Provider = provider, DeviceId = deviceId, ShareWeights = shareWeights };
        using Gpt2Model model = Gpt2Model.Open(folder, options);  // refuses a missing, changed or foreign folder
        Manifest manifest = model.Manifest;
        Golden golden = Golden.Read(Path.Combine(folder, "golden.json"));
        Console.WriteLine($"export {folder}: {manifest.NLayer} layers, {manifest.NHead} heads, d={manifest.NEmbd}, "
            + $"vocab {manifest.VocabSize}, opset {manifest.Opset} (needs ONNX Runtime >= {manifest.MinOnnxRuntime}), "
            + $"provider {provider}; {manifest.Files.Count} files match manifest.json (size + sha256)");
        var report = new Report();

        // The folder's own vocab.json + merges.txt (BpeTokenizer, byte level): the golden prompt ids.
        for (int i = 0; i < golden.Cases.Count; i++)
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
        GoldenCheck.Run(sessions, golden, batch, report);
        if (golden.Cases.Count > 0)  // case 0's continuation as text, through the library's generate loop
        {
            GenerationResult result = model.Generate(golden.Cases[0].Prompt,
                new GenerationOptions { MaxNewTokens = Math.Max(1, golden.Cases[0].GreedyIds.Length) });
            Console.WriteLine($"\"{golden.Cases[0].Prompt}\" → \"{result.Text}\" ({result.FinishReason})");
        }

        if (genai)
        {
            int eos = manifest.EosTokenId ?? throw new ExportFolderException("manifest.json names no eos_token_id");
            GenAiPath.Run(folder, provider, golden, eos, report);
        }
        Console.WriteLine($"golden check {(report.Failed == 0 ? "passed" : "FAILED")}: {report.Passed} comparisons ok, "
            + $"{report.Failed} failed");
        return report.Failed == 0 ? 0 : 1;
    }
}
