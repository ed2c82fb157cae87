// The library's front door: open an export folder (manifest, file checks, tokenizer, sessions) and generate.
namespace Gpt2Onnx;

/// <summary>Where and how to open a folder.</summary>
public sealed record Gpt2ModelOptions
{
    public string Provider { get; init; } = "cpu";  // "cpu" or "cuda" (the latter needs Microsoft.ML.OnnxRuntime.Gpu)
    public int DeviceId { get; init; }
    public bool ShareWeights { get; init; } = true;  // float32 on the CPU: one map of the weights file
    public bool VerifyFiles { get; init; } = true;   // size + sha256 of every listed file before the first token
}

/// <summary>One sequence's result: NEW tokens only (the prompt excluded; an end-of-text token that stopped it is
/// included), their text, and why it stopped: "eos" or "length".</summary>
public sealed record GenerationResult(long[] PromptIds, long[] Ids, string Text, string FinishReason);

public sealed class Gpt2Model : IDisposable
{
    private readonly ExportSessions _sessions;

    private Gpt2Model(string folder, Manifest manifest, ExportSessions sessions, Gpt2Tokenizer tokenizer)
    {
        Folder = folder;
        Manifest = manifest;
        _sessions = sessions;
        Tokenizer = tokenizer;
    }

    public string Folder { get; }
    public Manifest Manifest { get; }
    public Gpt2Tokenizer Tokenizer { get; }

    /// <summary>The two sessions, for callers that drive KvRunner themselves (the sample's golden check).</summary>
    public ExportSessions Sessions => _sessions;
    public long EndOfTextId => Manifest.EosTokenId ?? Tokenizer.EndOfTextId;
    public long PadTokenId => Manifest.PadTokenId ?? EndOfTextId;  // padded positions are masked: any id serves

    /// <summary>Reads manifest.json, checks every listed file (unless options say not to), then opens the tokenizer
    /// and both sessions. Throws NotAnExportException, MissingFileException or ChangedFileException.</summary>
    public static Gpt2Model Open(string folder, Gpt2ModelOptions? options = null)
    {
        options ??= new Gpt2ModelOptions();
        if (!Directory.Exists(folder))
        {
            throw new MissingFileException(folder, $"{folder} is not a folder");
        }
        Manifest manifest = Manifest.Read(folder);
        if (manifest.PaddingSide != "left")
        {
            throw new NotAnExportException($"{folder}: padding_side '{manifest.PaddingSide}'; this library pads left");
        }
        if (options.VerifyFiles)
        {
            FolderCheck.Verify(folder, manifest);
        }
        var tokenizer = new Gpt2Tokenizer(folder, manifest.EosTokenId ?? 50256);
        var sessions = new ExportSessions(folder, manifest, options.Provider, options.DeviceId, options.ShareWeights);
        return new Gpt2Model(folder, manifest, sessions, tokenizer);
    }

    /// <summary>The logits after the prompt (prefill's last position): (V).</summary>
    public float[] FirstStepLogits(long[] promptIds)
    {
        using var runner = new KvRunner(_sessions);
        return runner.Prefill(promptIds, Enumerable.Repeat(1L, promptIds.Length).ToArray(), 1);
    }

    public GenerationResult Generate(string prompt, GenerationOptions? options = null) =>
        GenerateBatch([prompt], options)[0];

    /// <summary>Several prompts in one left-padded batch; rows that reach end-of-text stop (their later steps are
    /// computed but dropped).</summary>
    public IReadOnlyList<GenerationResult> GenerateBatch(IReadOnlyList<string> prompts, GenerationOptions? options = null)
    {
        long[][] promptIds = prompts.Select(Tokenizer.Encode).ToArray();
        long[][] ids = GenerateIds(promptIds, options ?? new GenerationOptions(), out string[] reasons);
        return promptIds.Select((p, row) => new GenerationResult(p, ids[row], Tokenizer.Decode(ids[row]), reasons[row]))
            .ToList();
    }

    /// <summary>The core loop over token ids: prefill once, then one decode step per new token with the KV cache kept
    /// as OrtValues in ONNX Runtime. Returns the new ids per row.</summary>
    public long[][] GenerateIds(IReadOnlyList<long[]> prompts, GenerationOptions options, out string[] finishReasons)
    {
        options.Check();
        int batch = prompts.Count;
        (long[] input, long[] mask, int width) = Batching.LeftPad(prompts, PadTokenId);  // (B, T) each
        if (width + options.MaxNewTokens > Manifest.NPositions)
        {
            throw new ArgumentOutOfRangeException(nameof(options),
                $"{width} prompt + {options.MaxNewTokens} new tokens exceed n_positions {Manifest.NPositions}");
        }
        var chooser = new TokenChooser(options);
        var produced = Enumerable.Range(0, batch).Select(_ => new List<long>()).ToArray();
        finishReasons = Enumerable.Repeat("length", batch).ToArray();
        var done = new bool[batch];
        int vocab = Manifest.VocabSize;

        using var runner = new KvRunner(_sessions);
        float[] logits = runner.Prefill(input, mask, batch);  // (B, V)
        for (int step = 0; step < options.MaxNewTokens; step++)
        {
            var next = new long[batch];  // (B)
            for (int row = 0; row < batch; row++)
            {
                if (done[row])
                {
                    next[row] = PadTokenId;  // keeps the batch rectangular; never reported
                    continue;
                }
                next[row] = chooser.Choose(logits.AsSpan(row * vocab, vocab));
                produced[row].Add(next[row]);
                if (options.StopAtEndOfText && next[row] == EndOfTextId)
                {
                    done[row] = true;
                    finishReasons[row] = "eos";
                }
            }
            if (done.All(d => d) || step == options.MaxNewTokens - 1)
            {
                break;  // no decode step for a token nobody reads
            }
            mask = Batching.AppendOnes(mask, batch);  // (B, P + 1)
            logits = runner.Step(next, mask);
        }
        return produced.Select(p => p.ToArray()).ToArray();
    }

    public void Dispose() => _sessions.Dispose();
}
