// The checkpoint's own generation defaults: the export's generation_config.json supplies the options a caller leaves
// out, as the Python runtime applies them (runtimes/gpt2_onnx_runtimes/generation_defaults.py):
//
//     GenerationOptions' defaults  <  the checkpoint's generation_config.json  <  options given (GenerationOverrides)
//
// A checkpoint value the chosen mode would not read (temperature when greedy, length_penalty without beams) is left
// out and reported in Unused; keys that change generation but that this client does not apply are reported in
// NotApplied, never silently dropped.
using System.Text.Json;

namespace Gpt2Onnx;

/// <summary>Options a caller gives explicitly; null leaves the checkpoint's value (else the library default).</summary>
public sealed record GenerationOverrides
{
    /// <summary>See <see cref="GenerationOptions.MaxNewTokens"/>.</summary>
    public int? MaxNewTokens { get; init; }
    /// <summary>See <see cref="GenerationOptions.DoSample"/>.</summary>
    public bool? DoSample { get; init; }
    /// <summary>See <see cref="GenerationOptions.Temperature"/>.</summary>
    public double? Temperature { get; init; }
    /// <summary>See <see cref="GenerationOptions.TopK"/>.</summary>
    public int? TopK { get; init; }
    /// <summary>See <see cref="GenerationOptions.TopP"/>.</summary>
    public double? TopP { get; init; }
    /// <summary>See <see cref="GenerationOptions.MinP"/>.</summary>
    public double? MinP { get; init; }
    /// <summary>See <see cref="GenerationOptions.Seed"/>.</summary>
    public long? Seed { get; init; }
    /// <summary>See <see cref="GenerationOptions.StopAtEndOfText"/>.</summary>
    public bool? StopAtEndOfText { get; init; }
    /// <summary>See <see cref="GenerationOptions.RepetitionPenalty"/>.</summary>
    public double? RepetitionPenalty { get; init; }
    /// <summary>See <see cref="GenerationOptions.NoRepeatNgramSize"/>.</summary>
    public int? NoRepeatNgramSize { get; init; }
    /// <summary>See <see cref="GenerationOptions.MinNewTokens"/>.</summary>
    public int? MinNewTokens { get; init; }
    /// <summary>See <see cref="GenerationOptions.PresencePenalty"/>.</summary>
    public double? PresencePenalty { get; init; }
    /// <summary>See <see cref="GenerationOptions.FrequencyPenalty"/>.</summary>
    public double? FrequencyPenalty { get; init; }
    /// <summary>See <see cref="GenerationOptions.Stop"/>.</summary>
    public IReadOnlyList<string>? Stop { get; init; }
    /// <summary>See <see cref="GenerationOptions.NumBeams"/>.</summary>
    public int? NumBeams { get; init; }
    /// <summary>See <see cref="GenerationOptions.LengthPenalty"/>.</summary>
    public double? LengthPenalty { get; init; }
    /// <summary>See <see cref="GenerationOptions.EarlyStopping"/>.</summary>
    public EarlyStopping? EarlyStopping { get; init; }
}

/// <summary>What an export's generation_config.json sets, and how it combines with given options.</summary>
public sealed class CheckpointDefaults
{
    /// <summary>The file read, where the folder has one.</summary>
    public const string FileName = "generation_config.json";

    // Keys applied (as GenerationOptions fields) and keys that change generation but are not applied here, with
    // the value that changes nothing (null: any value is reported).
    private static readonly string[] Applied = ["max_new_tokens", "do_sample", "temperature", "top_k", "top_p",
        "min_p", "repetition_penalty", "num_beams", "length_penalty", "early_stopping", "no_repeat_ngram_size",
        "min_new_tokens"];
    private static readonly Dictionary<string, string?> NotAppliedNeutral = new()
    {
        ["num_return_sequences"] = "1", ["bad_words_ids"] = null, ["forced_eos_token_id"] = null,
        ["max_length"] = null, ["min_length"] = "0", ["typical_p"] = "1", ["epsilon_cutoff"] = "0",
        ["eta_cutoff"] = "0", ["diversity_penalty"] = "0", ["num_beam_groups"] = "1", ["penalty_alpha"] = null,
        ["sequence_bias"] = null, ["suppress_tokens"] = null, ["begin_suppress_tokens"] = null,
        ["forced_bos_token_id"] = null, ["exponential_decay_length_penalty"] = null, ["guidance_scale"] = null,
        ["stop_strings"] = null, ["force_words_ids"] = null, ["constraints"] = null,
    };
    private static readonly string[] SamplingOnly = ["temperature", "top_k", "top_p", "min_p"];
    private static readonly string[] BeamOnly = ["length_penalty", "early_stopping"];

    private readonly Dictionary<string, JsonElement> _values;

    private CheckpointDefaults(Dictionary<string, JsonElement> values, Dictionary<string, string> notApplied)
    {
        _values = values;
        NotApplied = notApplied;
    }

    /// <summary>The generation_config.json keys applied, with their JSON values.</summary>
    public IReadOnlyDictionary<string, JsonElement> Values => _values;

    /// <summary>Keys the file sets that this client does not apply, each with why.</summary>
    public IReadOnlyDictionary<string, string> NotApplied { get; }

    /// <summary>The defaults of <paramref name="folder"/> (none without a generation_config.json).</summary>
    public static CheckpointDefaults Read(string folder)
    {
        string path = Path.Combine(folder, FileName);
        if (!File.Exists(path))
        {
            return new CheckpointDefaults([], []);
        }
        try
        {
            using JsonDocument doc = JsonDocument.Parse(File.ReadAllText(path));
            if (doc.RootElement.ValueKind != JsonValueKind.Object)
            {
                throw new NotAnExportException($"{path} holds no JSON object");
            }
            var values = new Dictionary<string, JsonElement>();
            var notApplied = new Dictionary<string, string>();
            foreach (JsonProperty key in doc.RootElement.EnumerateObject())
            {
                if (key.Value.ValueKind == JsonValueKind.Null)
                {
                    continue;
                }
                if (Applied.Contains(key.Name))
                {
                    values[key.Name] = key.Value.Clone();
                }
                else if (NotAppliedNeutral.TryGetValue(key.Name, out string? neutral) && key.Value.ToString() != neutral)
                {
                    notApplied[key.Name] = $"{key.Value.GetRawText()} is not applied by the .NET client";
                }
            }
            return new CheckpointDefaults(values, notApplied);
        }
        catch (JsonException e)
        {
            throw new NotAnExportException($"{path} is not valid JSON: {e.Message}");
        }
    }

    /// <summary>GenerationOptions from these defaults and <paramref name="given"/> (which wins); the checkpoint's
    /// values the resulting mode would not read are left out and named in <paramref name="unused"/>.</summary>
    public GenerationOptions Resolve(GenerationOverrides given, out IReadOnlyList<string> unused)
    {
        bool sampling = given.DoSample ?? Bool("do_sample") ?? false;
        int beams = given.NumBeams ?? Int("num_beams") ?? 1;
        var dropped = new List<string>();
        bool Reads(string key)
        {
            bool read = !(SamplingOnly.Contains(key) && !sampling) && !(BeamOnly.Contains(key) && beams == 1);
            if (!read && _values.ContainsKey(key))
            {
                dropped.Add(key);
            }
            return read;
        }
        var o = new GenerationOptions();
        try
        {
            o = o with
            {
                MaxNewTokens = given.MaxNewTokens ?? Int("max_new_tokens") ?? o.MaxNewTokens,
                DoSample = sampling,
                NumBeams = beams,
                Temperature = given.Temperature ?? (Reads("temperature") ? Double("temperature") : null) ?? o.Temperature,
                TopK = given.TopK ?? (Reads("top_k") ? Int("top_k") : null) ?? o.TopK,
                TopP = given.TopP ?? (Reads("top_p") ? Double("top_p") : null) ?? o.TopP,
                MinP = given.MinP ?? (Reads("min_p") ? Double("min_p") : null) ?? o.MinP,
                Seed = given.Seed,
                StopAtEndOfText = given.StopAtEndOfText ?? o.StopAtEndOfText,
                RepetitionPenalty = given.RepetitionPenalty ?? Double("repetition_penalty") ?? o.RepetitionPenalty,
                NoRepeatNgramSize = given.NoRepeatNgramSize ?? Int("no_repeat_ngram_size") ?? o.NoRepeatNgramSize,
                MinNewTokens = given.MinNewTokens ?? Int("min_new_tokens") ?? o.MinNewTokens,
                PresencePenalty = given.PresencePenalty ?? o.PresencePenalty,
                FrequencyPenalty = given.FrequencyPenalty ?? o.FrequencyPenalty,
                Stop = given.Stop ?? o.Stop,
                LengthPenalty = given.LengthPenalty ?? (Reads("length_penalty") ? Double("length_penalty") : null)
                    ?? o.LengthPenalty,
                EarlyStopping = given.EarlyStopping ?? (Reads("early_stopping") ? Stopping() : null) ?? o.EarlyStopping,
            };
        }
        catch (InvalidOperationException e)
        {
            throw new NotAnExportException($"{FileName}: a value has the wrong type: {e.Message}");
        }
        unused = dropped;
        return o;
    }

    private bool? Bool(string key) => _values.TryGetValue(key, out JsonElement v) ? v.GetBoolean() : null;
    private int? Int(string key) => _values.TryGetValue(key, out JsonElement v) ? v.GetInt32() : null;
    private double? Double(string key) => _values.TryGetValue(key, out JsonElement v) ? v.GetDouble() : null;

    private EarlyStopping? Stopping() => !_values.TryGetValue("early_stopping", out JsonElement v) ? null
        : v.ValueKind == JsonValueKind.True ? EarlyStopping.Stop
        : v.ValueKind == JsonValueKind.False ? EarlyStopping.Heuristic
        : v.GetString() == "never" ? EarlyStopping.Never
        : throw new InvalidOperationException($"early_stopping {v.GetRawText()}");
}
