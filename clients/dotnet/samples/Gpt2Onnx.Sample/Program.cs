// gpt2-onnx-dotnet, the console sample on the Gpt2Onnx library:
//
//   gpt2-onnx-dotnet run EXPORT_FOLDER --prompt TEXT [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P]
//                    [--seed S] [--sample] [--ignore-eos] [--json] [--stop TEXT]... [--repetition-penalty R]
//                    [--no-repeat-ngram-size N] [--num-beams N] [--provider cpu|cuda] [--device-id N]
//   gpt2-onnx-dotnet check EXPORT_FOLDER [--genai] [--no-batch] [--weights shared-unpacked|per-session]
//                    [--provider cpu|cuda] [--device-id N]
//
// run generates (the JavaScript client's command line: any of --temperature/--top-k/--top-p/--seed turns sampling
// on, temperature 0 is greedy; --json prints one line {"prompt_ids", "ids", "text", "finish_reason"}, else the text
// streams). check runs the folder's golden.json through ONNX Runtime (and with --genai through onnxruntime-genai).
// Exit status: 0 done / all match, 1 a mismatch, 2 bad arguments or export folder, 3 ONNX Runtime could not run it
// (a provider that is not there included).
using Microsoft.ML.OnnxRuntime;

namespace Gpt2Onnx.Sample;

public static class Program
{
    internal const string Name = "gpt2-onnx-dotnet";

    public static int Main(string[] args)
    {
        Console.OutputEncoding = System.Text.Encoding.UTF8;
        try
        {
            return args.FirstOrDefault() switch
            {
                "run" => RunCommand.Execute(CommandLine.Parse(args[1..], RunCommand.Flags, RunCommand.Switches)),
                "check" => CheckCommand.Execute(CommandLine.Parse(args[1..], CheckCommand.Flags, CheckCommand.Switches)),
                "-h" or "--help" => Help(),
                _ => throw new UsageException("give a command: run or check (--help for both)"),
            };
        }
        catch (Exception e) when (e is UsageException or ArgumentException or ExportFolderException
            or NotSupportedException)
        {
            return Fail(e.Message, 2);
        }
        catch (ProviderUnavailableException e)
        {
            return Fail(e.Message, 3);
        }
        catch (OnnxRuntimeException e)
        {
            return Fail($"ONNX Runtime: {e.Message.Split('\n')[0]}", 3);
        }
        catch (Microsoft.ML.OnnxRuntimeGenAI.OnnxRuntimeGenAIException e)
        {
            return Fail($"onnxruntime-genai: {e.Message.Split('\n')[0]}", 3);
        }
    }

    private static int Fail(string message, int status)
    {
        string line = message.Split('\n')[0];
        int parameter = line.LastIndexOf(" (Parameter '", StringComparison.Ordinal);  // ArgumentException's suffix
        Console.Error.WriteLine($"{Name}: {(parameter > 0 ? line[..parameter] : line)}");
        return status;
    }

    private static int Help()
    {
        Console.WriteLine($"usage: {Name} run EXPORT_FOLDER --prompt TEXT [--max-new-tokens N] [--temperature T] "
            + "[--top-k K] [--top-p P] [--seed S] [--sample] [--ignore-eos] [--json] [--stop TEXT]... "
            + "[--repetition-penalty R] [--no-repeat-ngram-size N] [--num-beams N] [--provider cpu|cuda] [--device-id N]");
        Console.WriteLine($"       {Name} check EXPORT_FOLDER [--genai] [--no-batch] "
            + "[--weights shared-unpacked|per-session] [--provider cpu|cuda] [--device-id N]");
        return 0;
    }
}
