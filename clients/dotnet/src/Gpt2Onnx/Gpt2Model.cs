// The library's front door: open an export folder (manifest, file checks, tokenizer, sessions) and generate.
//
// Thread safety: a Gpt2Model is immutable once open and its ONNX Runtime sessions allow concurrent runs, so Generate,
// GenerateBatch, GenerateIds, GenerateStreamAsync and FirstStepLogits may be called from several threads at once;
// each call keeps its own KV cache.
using System.Runtime.CompilerServices;

namespace Gpt2Onnx;

/// <summary>Where and how to open a folder.</summary>
public sealed record Gpt2ModelOptions
{
    /// <summary>"cpu" or "cuda" (the latter needs Microsoft.ML.OnnxRuntime.Gpu; never a silent CPU fallback).</summary>
    public string Provider { get; init; } = "cpu";
    /// <summary>The CUDA device.</summary>
    public int DeviceId { get; init; }
    /// <summary>Float32 on the CPU: one map of the weights file shared by both sessions, prepacking off.</summary>
    public bool ShareWeights { get; init; } = true;
    /// <summary>Size + sha256 of every listed file before the first token.</summary>
    public bool VerifyFiles { get; init; } = true;
    /// <summary>ONNX Runtime intra-op threads per session (inter-op then 1); 0 leaves ONNX Runtime's default.</summary>
    public int IntraOpThreads { get; init; }
}

/// <summary>One sequence's result: NEW tokens only (the prompt excluded; an end-of-text token that stopped it is
/// included), their text (end-of-text left out; cut before a stop string), and why it stopped: "eos", "stop" or
/// "length".</summary>
public sealed record GenerationResult(long[] PromptIds, long[] Ids, string Text, string FinishReason);

/// <summary>An opened export folder: its manifest, tokenizer, checkpoint defaults and both sessions.</summary>
public sealed class Gpt2Model : IDisposable
{
    private Gpt2Model(string folder, Manifest manifest, ExportSessions sessions, Gpt2Tokenizer tokenizer,
        CheckpointDefaults defaults)
    {
        Folder = folder;
        Manifest = manifest;
        Sessions = sessions;
        Tokenizer = tokenizer;
        CheckpointDefaults = defaults;
    }

    /// <summary>The export folder.</summary>
    public string Folder { get; }
    /// <summary>Its manifest.json.</summary>
    public Manifest Manifest { get; }
    /// <summary>The folder's own tokenizer (vocab.json + merges.txt).</summary>
    public Gpt2Tokenizer Tokenizer { get; }
    /// <summary>The checkpoint's generation_config.json, as read.</summary>
    public CheckpointDefaults CheckpointDefaults { get; }
    /// <summary>The two sessions, for callers that drive KvRunner themselves (the sample's golden check).</summary>
    public ExportSessions Sessions { get; }
    /// <summary>The end-of-text token id.</summary>
    public long EndOfTextId => Manifest.EosTokenId ?? Tokenizer.EndOfTextId;
    /// <summary>The id that pads batches (masked: any id serves).</summary>
    public long PadTokenId => Manifest.PadTokenId ?? EndOfTextId;

    /// <summary>Reads manifest.json, checks every listed file (unless options say not to), then opens the tokenizer
    /// and both sessions. Throws NotAnExportException, MissingFileException, ChangedFileException or
    /// ProviderUnavailableException.</summary>
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
        CheckpointDefaults defaults = CheckpointDefaults.Read(folder);
        var sessions = new ExportSessions(folder, manifest, options.Provider, options.DeviceId, options.ShareWeights,
            options.IntraOpThreads);
        return new Gpt2Model(folder, manifest, sessions, tokenizer, defaults);
    }

    /// <summary>GenerationOptions from the checkpoint's defaults with <paramref name="given"/> winning (what
    /// Generate uses when no options are passed: <c>Options(new())</c>).</summary>
    public GenerationOptions Options(GenerationOverrides given) => CheckpointDefaults.Resolve(given, out _);

    /// <summary>The logits after the prompt (prefill's last position): (V). The prompt may fill all n_positions.
    /// </summary>
    public float[] FirstStepLogits(long[] promptIds)
    {
        CheckPrompt(promptIds, 0, newTokens: 0, nameof(promptIds), nameof(promptIds));
        using var runner = new KvRunner(Sessions, promptIds.Length + 1);
        return runner.Prefill(promptIds, Enumerable.Repeat(1L, promptIds.Length).ToArray(), 1);
    }

    /// <summary>One prompt; options null: the checkpoint's defaults.</summary>
    public GenerationResult Generate(string prompt, GenerationOptions? options = null) =>
        GenerateBatch([prompt], options)[0];

    /// <summary>Several prompts in one left-padded batch; each row's tokens equal what its prompt gives alone.</summary>
    public IReadOnlyList<GenerationResult> GenerateBatch(IReadOnlyList<string> prompts, GenerationOptions? options = null)
    {
        long[][] promptIds = prompts.Select(EncodePrompt).ToArray();
        return GenerateFromIds(promptIds, options ?? Options(new()));
    }

    /// <summary>The core loop over token ids: the new ids per row and why each row stopped.</summary>
    public long[][] GenerateIds(IReadOnlyList<long[]> prompts, GenerationOptions options, out string[] finishReasons)
    {
        IReadOnlyList<GenerationResult> results = GenerateFromIds(prompts, options);
        finishReasons = results.Select(r => r.FinishReason).ToArray();
        return results.Select(r => r.Ids).ToArray();
    }

    /// <summary>Results for token-id prompts: greedy, sampled or beam search, as <paramref name="options"/> say.</summary>
    public IReadOnlyList<GenerationResult> GenerateFromIds(IReadOnlyList<long[]> prompts, GenerationOptions options)
    {
        if (options.NumBeams > 1)
        {
            return BeamSearch.Run(this, prompts, options);
        }
        using var generation = new Generation(this, prompts, options, Tokenizer);
        Span<long> chosen = new long[prompts.Count];
        while (!generation.Done)
        {
            generation.Step(chosen);
        }
        return Enumerable.Range(0, prompts.Count).Select(generation.Result).ToList();
    }

    /// <summary>Prefills <paramref name="prompts"/> and returns a generator to step through the new tokens.</summary>
    public Gpt2Generator CreateGenerator(IReadOnlyList<long[]> prompts, GenerationOptions options) =>
        new(this, prompts, options);

    /// <summary>The text of one prompt's continuation as it is generated: pieces that never split a character and
    /// join to the final text (never past a stop string). A token already cancelled throws before the prefill;
    /// cancelling later stops generation within one step. The prefill and every step run off the caller's first
    /// MoveNextAsync (after a yield), never synchronously inside it.</summary>
    public async IAsyncEnumerable<string> GenerateStreamAsync(string prompt, GenerationOptions? options = null,
        [EnumeratorCancellation] CancellationToken cancellationToken = default)
    {
        cancellationToken.ThrowIfCancellationRequested();
        await Task.Yield();  // the caller's MoveNextAsync returns before the prefill runs
        using var stream = new StreamingGeneration(this, EncodePrompt(prompt), options ?? Options(new()));
        while (stream.MoveNext(cancellationToken))
        {
            yield return stream.Current;
        }
    }

    /// <summary>Streams like <see cref="GenerateStreamAsync"/>, and hands back the final result.</summary>
    public StreamingGeneration Stream(string prompt, GenerationOptions? options = null) =>
        new(this, EncodePrompt(prompt), options ?? Options(new()));

    internal long[] EncodePrompt(string prompt)
    {
        long[] ids = Tokenizer.Encode(prompt);
        if (ids.Length == 0)
        {
            throw new ArgumentException("the prompt is empty: give at least one token", nameof(prompt));
        }
        return ids;
    }

    /// <summary>Refuses prompts the model cannot take: none, an empty one, an id outside the vocabulary, or prompt +
    /// new tokens beyond n_positions.</summary>
    internal void CheckPrompts(IReadOnlyList<long[]> prompts, GenerationOptions options)
    {
        if (prompts.Count == 0)
        {
            throw new ArgumentException("no prompts given", nameof(prompts));
        }
        for (int i = 0; i < prompts.Count; i++)
        {
            CheckPrompt(prompts[i], i, options.MaxNewTokens, nameof(prompts), nameof(options));
        }
    }

    // One prompt of token ids: not empty, ids inside the vocabulary, and room for newTokens more in n_positions. The
    // exceptions name the caller's parameters: the prompts', and the one that sets the new tokens (its options).
    private void CheckPrompt(long[] prompt, int index, int newTokens, string promptParam, string lengthParam)
    {
        if (prompt.Length == 0)
        {
            throw new ArgumentException($"prompt {index} is empty: give at least one token", promptParam);
        }
        if (prompt.Any(id => id < 0 || id >= Manifest.VocabSize))
        {
            throw new ArgumentOutOfRangeException(promptParam,
                $"prompt {index} holds a token id outside [0, {Manifest.VocabSize})");
        }
        if (prompt.Length + newTokens > Manifest.NPositions)
        {
            string room = newTokens > 0 ? $"with MaxNewTokens {newTokens} that exceeds" : "that exceeds";
            throw new ArgumentOutOfRangeException(lengthParam,
                $"prompt {index} has {prompt.Length} tokens; {room} the model's {Manifest.NPositions} positions");
        }
    }

    /// <summary>Releases both sessions.</summary>
    public void Dispose() => Sessions.Dispose();
}
