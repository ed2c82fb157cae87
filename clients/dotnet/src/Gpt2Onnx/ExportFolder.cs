// The two JSON files of an export folder that a consumer reads: manifest.json (the I/O contract) and golden.json
// (prompts with the source model's greedy continuation and last-position top-5 logits).
using System.Text.Json;

namespace Gpt2Onnx;


/// <summary>One file the manifest lists: its size in bytes and its sha256 (lower-case hex).</summary>
public sealed record FileRecord(long Size, string Sha256);

/// <summary>One graph: its file and its tensor names in graph order.</summary>
public sealed record GraphSpec(string File, IReadOnlyList<string> Inputs, IReadOnlyList<string> Outputs);

/// <summary>What the sample needs from manifest.json.</summary>
/// <remarks>WeightsIndex: where each tensor lies in WeightsFile, in file order; empty in exports made before
/// manifest.json listed it.</remarks>
public sealed record Manifest(
    int NLayer, int NHead, int NEmbd, int VocabSize, int NPositions, int Opset, string MinOnnxRuntime,
    int? EosTokenId, int? PadTokenId, GraphSpec Prefill, GraphSpec Decode,
    string Precision, string WeightsFile, IReadOnlyList<WeightEntry> WeightsIndex,
    IReadOnlyDictionary<string, FileRecord> Files, string PaddingSide)
{
    private const int SchemaVersion = 1;  // the newest manifest.json schema this sample reads

    /// <summary>Reads and checks FOLDER/manifest.json (not the files it lists: see ExportFolder.Verify).</summary>
    public static Manifest Read(string folder)
    {
        string path = Path.Combine(folder, "manifest.json");
        using JsonDocument doc = ReadJson(path, "gpt2-onnx", SchemaVersion);
        try
        {
            JsonElement root = doc.RootElement, model = root.GetProperty("model"), tokens = root.GetProperty("tokens");
            JsonElement graphs = root.GetProperty("graphs");
            string weightsFile = PlainFileName(root.GetProperty("weights_file").GetString() ?? "", path);
            List<WeightEntry> index = [];
            if (root.TryGetProperty("weights_index", out JsonElement entries))
            {
                index = entries.EnumerateArray().Select(e => new WeightEntry(
                    e.GetProperty("name").GetString() ?? "", e.GetProperty("dtype").GetString() ?? "",
                    e.GetProperty("shape").EnumerateArray().Select(d => d.GetInt64()).ToArray(),
                    e.GetProperty("offset").GetInt64(), e.GetProperty("length").GetInt64())).ToList();
                if (root.GetProperty("files").TryGetProperty(weightsFile, out JsonElement record))
                {
                    try
                    {
                        WeightEntry.CheckIndex(index, record.GetProperty("size").GetInt64());
                    }
                    catch (ExportFolderException bad)
                    {
                        throw new NotAnExportException($"{path} {bad.Message}");  // the manifest contradicts itself
                    }
                }
            }
            return new Manifest(
                model.GetProperty("n_layer").GetInt32(), model.GetProperty("n_head").GetInt32(),
                model.GetProperty("n_embd").GetInt32(), model.GetProperty("vocab_size").GetInt32(),
                model.GetProperty("n_positions").GetInt32(), root.GetProperty("opset").GetInt32(),
                root.GetProperty("min_onnxruntime").GetString() ?? "",
                OptionalId(tokens, "eos_token_id"), OptionalId(tokens, "pad_token_id"),
                Graph(graphs.GetProperty("prefill"), path), Graph(graphs.GetProperty("decode"), path),
                root.TryGetProperty("precision", out JsonElement p) ? p.GetString() ?? "float32" : "float32",
                weightsFile, index, ReadFiles(root.GetProperty("files"), path),
                root.TryGetProperty("padding_side", out JsonElement side) ? side.GetString() ?? "left" : "left");
        }
        catch (Exception e) when (e is KeyNotFoundException or InvalidOperationException or FormatException)
        {
            throw new NotAnExportException($"{path} is malformed: {e.Message}");
        }
    }

    // "files": {name: {"size": int, "sha256": hex}}: every file of the folder but manifest.json itself.
    private static Dictionary<string, FileRecord> ReadFiles(JsonElement files, string path)
    {
        var records = new Dictionary<string, FileRecord>(StringComparer.Ordinal);
        foreach (JsonProperty file in files.EnumerateObject())
        {
            records[PlainFileName(file.Name, path)] = new FileRecord(
                file.Value.GetProperty("size").GetInt64(), file.Value.GetProperty("sha256").GetString() ?? "");
        }
        if (records.Count == 0)
        {
            throw new NotAnExportException($"{path} lists no files");
        }
        return records;
    }

    private static GraphSpec Graph(JsonElement entry, string path)
    {
        static List<string> Names(JsonElement list) =>
            list.EnumerateArray().Select(t => t.GetProperty("name").GetString()!).ToList();
        string file = PlainFileName(entry.GetProperty("file").GetString() ?? "", path);
        return new GraphSpec(file, Names(entry.GetProperty("inputs")), Names(entry.GetProperty("outputs")));
    }

    // A manifest names files inside its folder only: refuse "../x", "/x" and "a/b".
    private static string PlainFileName(string file, string path)
    {
        if (file.Length == 0 || file is "." or ".." || file.IndexOfAny(['/', '\\', '\0']) >= 0)
        {
            throw new NotAnExportException($"{path}: '{file}' is not a plain file name inside the export folder");
        }
        return file;
    }

    private static int? OptionalId(JsonElement tokens, string key) =>
        tokens.TryGetProperty(key, out JsonElement id) && id.ValueKind == JsonValueKind.Number ? id.GetInt32() : null;

    internal static JsonDocument ReadJson(string path, string format, int newestSchema)
    {
        if (!File.Exists(path))
        {
            throw new NotAnExportException($"{path} does not exist; is this a gpt2-onnx export folder?");
        }
        JsonDocument doc;
        try
        {
            doc = JsonDocument.Parse(File.ReadAllText(path));
        }
        catch (JsonException e)
        {
            throw new NotAnExportException($"{path} is not valid JSON: {e.Message}");
        }
        JsonElement root = doc.RootElement;
        if (root.ValueKind != JsonValueKind.Object
            || !root.TryGetProperty("format", out JsonElement f) || f.ValueKind != JsonValueKind.String
            || f.GetString() != format
            || !root.TryGetProperty("schema_version", out JsonElement v) || v.ValueKind != JsonValueKind.Number
            || !v.TryGetInt32(out int schema) || schema > newestSchema)
        {
            doc.Dispose();
            throw new NotAnExportException($"{path} is not a {format} file this library reads");
        }
        return doc;
    }
}

/// <summary>One golden case: the prompt's ids, the greedy continuation (end of text not special), top-5 logits.
/// GreedyMargins: per step, the chosen token's logit minus the runner-up's (empty in older golden files).
/// LogitsAtol: this case's limit on |logits - expected| (fp32 exports: a small factor of the float32 source model's
/// own error from float64 over the case's positions, plus a floor scaled by the logits' magnitude); null: the
/// file's. Top5Logits of fp32 exports are the float64 source model's values.</summary>
public sealed record GoldenCase(
    string Prompt, long[] InputIds, long[] GreedyIds, long[] Top5Ids, double[] Top5Logits, float[] GreedyMargins,
    double? LogitsAtol = null);

/// <summary>golden.json: the cases and the file's tolerance on logits.</summary>
public sealed record Golden(IReadOnlyList<GoldenCase> Cases, double LogitsAtol)
{
    /// <summary>The limit on |logits - expected| for a case: its own, else the file's.</summary>
    public double AtolFor(GoldenCase c) => c.LogitsAtol ?? LogitsAtol;

    private const int SchemaVersion = 1;

    /// <summary>Reads and checks a golden.json.</summary>
    public static Golden Read(string path)
    {
        using JsonDocument doc = Manifest.ReadJson(path, "gpt2-onnx-golden", SchemaVersion);
        try
        {
            JsonElement root = doc.RootElement;
            static long[] Longs(JsonElement e) => e.EnumerateArray().Select(x => x.GetInt64()).ToArray();
            var cases = root.GetProperty("cases").EnumerateArray().Select(c => new GoldenCase(
                c.GetProperty("prompt").GetString() ?? "",
                Longs(c.GetProperty("input_ids")), Longs(c.GetProperty("greedy_ids")), Longs(c.GetProperty("top5_ids")),
                c.GetProperty("top5_logits").EnumerateArray().Select(x => x.GetDouble()).ToArray(),
                c.TryGetProperty("greedy_margins", out JsonElement m)
                    ? m.EnumerateArray().Select(x => x.GetSingle()).ToArray()
                    : Array.Empty<float>(),
                c.TryGetProperty("logits_atol", out JsonElement a) ? a.GetDouble() : null)).ToList();
            return new Golden(cases, root.GetProperty("logits_atol").GetDouble());
        }
        catch (Exception e) when (e is KeyNotFoundException or InvalidOperationException or FormatException)
        {
            throw new NotAnExportException($"{path} is malformed: {e.Message}");
        }
    }
}
