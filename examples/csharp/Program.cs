// gpt2-onnx C# sample: check an export folder against its golden.json with Microsoft.ML.OnnxRuntime alone
// (InferenceSession, OrtValue, IO binding), tokenize with Microsoft.ML.Tokenizers, and optionally run the same
// prompts through onnxruntime-genai (--genai).
//
//   dotnet run -c Release -- EXPORT_FOLDER [--provider cpu|cuda] [--device-id N] [--no-batch] [--genai]
//                            [--weights shared-unpacked|per-session]
//
// Exit status: 0 all match, 1 a mismatch, 2 bad arguments or export folder, 3 ONNX Runtime could not run it.
using Microsoft.ML.OnnxRuntime;
using Microsoft.ML.Tokenizers;

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
        Manifest manifest = Manifest.Read(folder);
        Golden golden = Golden.Read(Path.Combine(folder, "golden.json"));
        Console.WriteLine($"export {folder}: {manifest.NLayer} layers, {manifest.NHead} heads, d={manifest.NEmbd}, "
            + $"vocab {manifest.VocabSize}, opset {manifest.Opset} (needs ONNX Runtime >= {manifest.MinOnnxRuntime}), "
            + $"provider {provider}");
        var report = new Report();

        // GPT-2's byte-level BPE in .NET: the same ids as the export's tokenizer.json for every golden prompt.
        // (BpeTokenizer over the folder's vocab.json + merges.txt is the alternative for a checkpoint's own files.)
        Tokenizer tokenizer = TiktokenTokenizer.CreateForModel("gpt2");
        for (int i = 0; i < golden.Cases.Count; i++)
        {
            IReadOnlyList<int> ids = tokenizer.EncodeToIds(golden.Cases[i].Prompt);
            report.Add(ids.Select(id => (long)id).SequenceEqual(golden.Cases[i].InputIds),
                $"case {i}: Microsoft.ML.Tokenizers gives the golden prompt ids");
        }

        using (var sessions = new ExportSessions(folder, manifest, provider, deviceId, shareWeights))
        {
            Console.WriteLine(sessions.SharedWeights is { } shared
                ? $"weights: one map of {manifest.WeightsFile} ({shared.TensorCount} tensors, "
                  + $"{shared.MappedBytes / (1024 * 1024)} MiB) shared by both sessions, prepacking off"
                : "weights: loaded and prepacked by ONNX Runtime for each session");
            Console.WriteLine(
                $"memory: working set {Environment.WorkingSet / (1024 * 1024)} MiB with both sessions loaded");
            long[][] tokens = GoldenCheck.Run(sessions, golden, batch, report);
            if (tokens.Length > 0)  // case 0's continuation as text
            {
                string text = tokenizer.Decode(tokens[0].Select(t => (int)t));
                Console.WriteLine($"\"{golden.Cases[0].Prompt}\" → \"{text}\"");
            }
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
