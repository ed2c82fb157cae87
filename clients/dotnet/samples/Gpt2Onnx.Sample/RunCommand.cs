// gpt2-onnx-dotnet run: generate from a prompt, with the JavaScript client's command line (clients/js/bin).
using System.Text.Encodings.Web;
using System.Text.Json;
using System.Text.Json.Nodes;

namespace Gpt2Onnx.Sample;

internal static class RunCommand
{
    public static readonly string[] Flags = ["--prompt", "--max-new-tokens", "--temperature", "--top-k", "--top-p",
        "--seed", "--stop", "--repetition-penalty", "--no-repeat-ngram-size", "--num-beams", "--provider",
        "--device-id"];
    public static readonly string[] Switches = ["--json", "--sample", "--ignore-eos"];

    public static int Execute(CommandLine line)
    {
        string prompt = line.Text("--prompt") ?? throw new UsageException("run needs --prompt TEXT");
        var modelOptions = new Gpt2ModelOptions
        {
            Provider = line.Text("--provider") ?? "cpu",
            DeviceId = (int)(line.WholeNumber("--device-id") ?? 0),
        };
        if (modelOptions.Provider is not ("cpu" or "cuda"))
        {
            throw new UsageException($"--provider takes cpu or cuda, not '{modelOptions.Provider}'");
        }
        using Gpt2Model model = Gpt2Model.Open(line.Folder, modelOptions);
        GenerationOptions options = model.Options(Overrides(line));
        options.Validate();
        if (line.Has("--json"))
        {
            GenerationResult result = model.Generate(prompt, options);
            Console.WriteLine(Json(result));
            return 0;
        }
        if (options.NumBeams > 1)
        {
            Console.WriteLine(model.Generate(prompt, options).Text);
            return 0;
        }
        using StreamingGeneration stream = model.Stream(prompt, options);
        while (stream.MoveNext())
        {
            Console.Write(stream.Current);
            Console.Out.Flush();
        }
        Console.WriteLine();
        return 0;
    }

    // What the command line gives; the rest comes from the checkpoint's generation_config.json, else the defaults.
    private static GenerationOverrides Overrides(CommandLine line)
    {
        double? temperature = line.Number("--temperature");
        bool greedy = temperature == 0;  // as in the JavaScript client: temperature 0 is greedy
        bool sampling = !greedy && (line.Has("--sample") || temperature is not null || line.Has("--top-k")
            || line.Has("--top-p") || line.Has("--seed"));
        long? seed = line.WholeNumber("--seed");
        if (seed < 0)
        {
            throw new UsageException($"--seed takes an integer in [0, 2^63), not {seed}");
        }
        return new GenerationOverrides
        {
            MaxNewTokens = (int?)line.WholeNumber("--max-new-tokens") ?? 16,
            DoSample = greedy ? false : sampling ? true : null,
            Temperature = sampling ? temperature : null,
            TopK = sampling ? (int?)line.WholeNumber("--top-k") : null,
            TopP = sampling ? line.Number("--top-p") : null,
            Seed = sampling ? seed : null,
            StopAtEndOfText = line.Has("--ignore-eos") ? false : null,
            Stop = line.All("--stop") is { Count: > 0 } stops ? stops : null,
            RepetitionPenalty = line.Number("--repetition-penalty"),
            NoRepeatNgramSize = (int?)line.WholeNumber("--no-repeat-ngram-size"),
            NumBeams = (int?)line.WholeNumber("--num-beams"),
        };
    }

    private static string Json(GenerationResult result)
    {
        var json = new JsonObject
        {
            ["prompt_ids"] = new JsonArray([.. result.PromptIds.Select(id => (JsonNode)id)]),
            ["ids"] = new JsonArray([.. result.Ids.Select(id => (JsonNode)id)]),
            ["text"] = result.Text,
            ["finish_reason"] = result.FinishReason,
        };
        return json.ToJsonString(new JsonSerializerOptions { Encoder = JavaScriptEncoder.UnsafeRelaxedJsonEscaping });
    }
}
