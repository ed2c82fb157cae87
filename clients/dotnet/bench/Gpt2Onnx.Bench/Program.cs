// The decode benchmark: gpt2-onnx-dotnet-bench EXPORT_FOLDER [--prompt N] [--new N] [--rounds N] [--warmup N]
// [--threads N] [--json]. The model is opened once; each round prefills a prompt of N synthetic ids
// (ids[i] = (i * 7919 + 13) % vocab_size; timed: prefill_ms), then generates exactly --new greedy tokens through
// the library's public Gpt2Generator, end-of-text ignored (timed as a whole: decode_ms_per_token = loop time / N;
// N tokens take N - 1 decode runs, as Generate and clients/cpp's benchmark count them), and counts the managed bytes
// this thread allocated over that loop, per token.
// Warm-up rounds are not recorded. Exit 2 on bad arguments; the same contract as clients/cpp's benchmark.
using System.Diagnostics;
using System.Globalization;
using System.Text.Json;
using System.Text.Json.Nodes;
using Gpt2Onnx;
using Microsoft.ML.OnnxRuntime;

namespace Gpt2Onnx.Bench;

public static class Program
{
    private const string Name = "gpt2-onnx-dotnet-bench";

    public static int Main(string[] args)
    {
        BenchArgs parsed;
        try
        {
            parsed = BenchArgs.Parse(args);
        }
        catch (FormatException e)
        {
            Console.Error.WriteLine($"{Name}: {e.Message}");
            return 2;
        }
        try
        {
            return Run(parsed);
        }
        catch (Exception e) when (e is Gpt2OnnxException or ArgumentException)
        {
            Console.Error.WriteLine($"{Name}: {e.Message}");
            return 2;
        }
    }

    private static int Run(BenchArgs a)
    {
        using Gpt2Model model = Gpt2Model.Open(a.Folder, new Gpt2ModelOptions { IntraOpThreads = a.Threads });
        int vocab = model.Manifest.VocabSize;
        long[] prompt = Enumerable.Range(0, a.Prompt).Select(i => (long)(((long)i * 7919 + 13) % vocab)).ToArray();
        // Exactly `new` tokens, end-of-text ignored: `new` choices and `new` - 1 decode runs (no decode follows the
        // last token), as Generate and the C++ client's benchmark do.
        var options = new GenerationOptions { MaxNewTokens = a.New, StopAtEndOfText = false };
        var prefill = new List<double>();
        var decode = new List<double>();
        var allocated = new List<double>();
        for (int round = 0; round < a.Warmup + a.Rounds; round++)
        {
            var (p, d, bytes) = Round(model, prompt, options, a.New);
            if (round >= a.Warmup)
            {
                prefill.Add(p);
                decode.Add(d);
                allocated.Add(bytes);
            }
        }
        if (a.Json)
        {
            Console.WriteLine(Json(a, model, prefill, decode, allocated));
        }
        else
        {
            Table(a, model, prefill, decode, allocated);
        }
        return 0;
    }

    private static (double PrefillMs, double DecodeMsPerToken, double BytesPerToken) Round(Gpt2Model model,
        long[] prompt, GenerationOptions options, int steps)
    {
        var clock = Stopwatch.StartNew();
        using Gpt2Generator generator = model.CreateGenerator([prompt], options);
        double prefillMs = clock.Elapsed.TotalMilliseconds;
        long before = GC.GetAllocatedBytesForCurrentThread();
        clock.Restart();
        while (!generator.IsDone)
        {
            generator.Step();
        }
        double decodeMs = clock.Elapsed.TotalMilliseconds;
        long bytes = GC.GetAllocatedBytesForCurrentThread() - before;
        return (prefillMs, decodeMs / steps, (double)bytes / steps);
    }

    private static string Json(BenchArgs a, Gpt2Model model, List<double> prefill, List<double> decode,
        List<double> allocated)
    {
        static JsonArray Numbers(List<double> values) => [.. values.Select(v => (JsonNode)Math.Round(v, 4))];
        var result = new JsonObject
        {
            ["client"] = "dotnet",
            ["folder"] = Path.GetFullPath(a.Folder),
            ["precision"] = model.Manifest.Precision,
            ["onnxruntime"] = OrtEnv.Instance().GetVersionString(),
            ["threads"] = a.Threads,
            ["prompt_tokens"] = a.Prompt,
            ["new_tokens"] = a.New,
            ["rounds"] = a.Rounds,
            ["prefill_ms"] = Numbers(prefill),
            ["decode_ms_per_token"] = Numbers(decode),
            ["allocated_bytes_per_token"] = Numbers(allocated),
            ["peak_rss_mib"] = PeakRssMib(),
        };
        return result.ToJsonString(new JsonSerializerOptions { WriteIndented = false });
    }

    private static void Table(BenchArgs a, Gpt2Model model, List<double> prefill, List<double> decode,
        List<double> allocated)
    {
        Console.WriteLine($"{a.Folder} ({model.Manifest.Precision}), ONNX Runtime {OrtEnv.Instance().GetVersionString()}, "
            + $"{a.Threads} thread(s), prompt {a.Prompt}, {a.New} new tokens");
        Console.WriteLine("round  prefill ms  decode ms/token  bytes/token");
        for (int r = 0; r < prefill.Count; r++)
        {
            Console.WriteLine(string.Create(CultureInfo.InvariantCulture,
                $"{r,5}  {prefill[r],10:F3}  {decode[r],15:F4}  {allocated[r],11:F1}"));
        }
        Console.WriteLine($"peak RSS {PeakRssMib()?.ToString("F1", CultureInfo.InvariantCulture) ?? "n/a"} MiB");
    }

    // VmHWM from /proc/self/status (Linux); null elsewhere.
    private static double? PeakRssMib()
    {
        const string path = "/proc/self/status";
        if (!File.Exists(path))
        {
            return null;
        }
        string? line = File.ReadLines(path).FirstOrDefault(l => l.StartsWith("VmHWM:", StringComparison.Ordinal));
        return line is null ? null
            : Math.Round(double.Parse(line.Split(' ', StringSplitOptions.RemoveEmptyEntries)[1],
                CultureInfo.InvariantCulture) / 1024.0, 1);
    }
}

/// <summary>The benchmark's command line.</summary>
internal sealed record BenchArgs(string Folder, int Prompt, int New, int Rounds, int Warmup, int Threads, bool Json)
{
    public static BenchArgs Parse(string[] args)
    {
        string? folder = null;
        int prompt = 32, @new = 64, rounds = 5, warmup = 1, threads = 1;
        bool json = false;
        for (int i = 0; i < args.Length; i++)
        {
            switch (args[i])
            {
                case "--prompt": prompt = Count(args, ++i, "--prompt", 1); break;
                case "--new": @new = Count(args, ++i, "--new", 1); break;
                case "--rounds": rounds = Count(args, ++i, "--rounds", 1); break;
                case "--warmup": warmup = Count(args, ++i, "--warmup", 0); break;
                case "--threads": threads = Count(args, ++i, "--threads", 1); break;
                case "--json": json = true; break;
                case var a when !a.StartsWith('-') && folder is null: folder = a; break;
                default: throw new FormatException($"unexpected argument '{args[i]}'; usage: {Usage}");
            }
        }
        return new BenchArgs(folder ?? throw new FormatException($"no export folder given; usage: {Usage}"),
            prompt, @new, rounds, warmup, threads, json);
    }

    private const string Usage =
        "gpt2-onnx-dotnet-bench EXPORT_FOLDER [--prompt N] [--new N] [--rounds N] [--warmup N] [--threads N] [--json]";

    private static int Count(string[] args, int i, string flag, int least)
    {
        if (i >= args.Length || !int.TryParse(args[i], NumberStyles.None, CultureInfo.InvariantCulture, out int n)
            || n < least)
        {
            throw new FormatException($"{flag} takes an integer >= {least}");
        }
        return n;
    }
}
