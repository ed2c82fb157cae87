// Greedy or sampled generation over a left-padded batch, one step at a time (runtimes/gpt2_onnx_runtimes/
// generation.py and decoding.py): prefill once, then per step choose each unfinished row's token (processors, then
// the argmax or one draw from the row's own SplitMix64), account for it (the end rule), and run one decode step for
// all rows. A finished row is fed the pad token until every row has finished; its output is dropped.
//
//   end rule  end-of-text (unless StopAtEndOfText is false) → "eos"; else a stop string in the decoded text →
//             "stop" (the text cut before it, its tokens kept); else MaxNewTokens new tokens → "length"
//   seeding   every row draws from its own SplitMix64(seed), so a row of a batch gives what its prompt gives alone;
//             no Seed: one fresh random seed for the call (decoding.py's seed_of)
namespace Gpt2Onnx;

/// <summary>One row being generated.</summary>
internal sealed class GenerationRow(long[] prompt, int capacity, ulong seed)
{
    public long[] PromptIds { get; } = prompt;
    public RowHistory History { get; } = new(prompt, capacity);
    public SplitMix64 Random { get; } = new(seed);
    public string? Finish { get; set; }
    public string? CutText { get; set; }  // the text before a stop string, when one ended the row
}

/// <summary>A batched greedy or sampled generation, run by <see cref="Step"/> until <see cref="Done"/>. Not shared
/// between threads; the sessions underneath are.</summary>
internal sealed class Generation : IDisposable
{
    private readonly GenerationOptions _options;
    private readonly Gpt2Tokenizer? _tokenizer;
    private readonly KvRunner _runner;
    private readonly LogitsProcessors _processors;
    private readonly TokenSampler? _sampler;
    private readonly long _endOfText, _pad;
    private readonly long[] _fed;  // (B): the tokens the next decode step reads
    private readonly int _vocab;
    private int _step;

    public Generation(Gpt2Model model, IReadOnlyList<long[]> prompts, GenerationOptions options,
        Gpt2Tokenizer? tokenizer)
    {
        options.Validate();
        model.CheckPrompts(prompts, options);
        _options = options;
        _tokenizer = tokenizer;
        _endOfText = options.StopAtEndOfText ? model.EndOfTextId : -1;
        _pad = model.PadTokenId;
        _vocab = model.Manifest.VocabSize;
        (long[] ids, long[] mask, int width) = Batching.LeftPad(prompts, _pad);  // (B, T) each
        Seed = options.SeedOrFresh();
        Rows = prompts.Select(p => new GenerationRow(p, p.Length + options.MaxNewTokens, (ulong)Seed)).ToArray();
        _processors = new LogitsProcessors(options, model.EndOfTextId);
        _sampler = options.DoSample ? new TokenSampler(_vocab) : null;
        _fed = new long[prompts.Count];
        _runner = new KvRunner(model.Sessions, width + options.MaxNewTokens);
        try
        {
            _runner.Start(ids, mask, prompts.Count, prompts.Count);
        }
        catch
        {
            _runner.Dispose();
            throw;
        }
    }

    public GenerationRow[] Rows { get; }
    public bool Done { get; private set; }
    public long Seed { get; }  // the options' seed, or the fresh one drawn for this call

    /// <summary>Chooses one token for every unfinished row (written into <paramref name="chosen"/>, -1 for rows
    /// finished before this step) and, unless every row has now finished, runs the decode step that follows.</summary>
    public void Step(Span<long> chosen)
    {
        if (Done)
        {
            throw new InvalidOperationException("the generation has finished");
        }
        float[] logits = _runner.LogitsArray;
        bool allFinished = true;
        for (int row = 0; row < Rows.Length; row++)
        {
            GenerationRow state = Rows[row];
            if (state.Finish is not null)
            {
                chosen[row] = -1;
                _fed[row] = _pad;  // keeps the batch rectangular; never reported
                continue;
            }
            long token = Choose(logits, row * _vocab, state);
            chosen[row] = token;
            _fed[row] = token;
            Account(state, token);
            allFinished &= state.Finish is not null;
        }
        _step++;
        if (allFinished || _step >= _options.MaxNewTokens)
        {
            Done = true;  // no decode step for a token nobody reads
            return;
        }
        _runner.Advance(_fed);
    }

    private long Choose(float[] logits, int offset, GenerationRow row)
    {
        if (_processors.Any)
        {
            _processors.Apply(logits, offset, row.History);
        }
        if (_sampler is null)
        {
            return Batching.Argmax(logits.AsSpan(offset, _vocab));
        }
        return _sampler.Sample(logits, offset, _options.Temperature, _options.TopK, _options.TopP, _options.MinP,
            row.Random.NextUniform());
    }

    private void Account(GenerationRow row, long token)
    {
        row.History.Add(token);  // the end-of-text token too, as transformers returns it
        if (token == _endOfText)
        {
            row.Finish = "eos";
            return;
        }
        if (_options.Stop.Count > 0 && _tokenizer is not null)
        {
            string text = _tokenizer.Decode(row.History.Generated.ToArray());
            int cut = -1;
            foreach (string stop in _options.Stop)
            {
                int at = text.IndexOf(stop, StringComparison.Ordinal);
                cut = at >= 0 && (cut < 0 || at < cut) ? at : cut;
            }
            if (cut >= 0)
            {
                row.Finish = "stop";
                row.CutText = text[..cut];
                return;
            }
        }
        if (row.History.NewTokens >= _options.MaxNewTokens)
        {
            row.Finish = "length";
        }
    }

    /// <summary>Each row's result so far (complete once Done).</summary>
    public GenerationResult Result(int row)
    {
        GenerationRow state = Rows[row];
        long[] ids = state.History.Generated.ToArray();
        string text = state.CutText ?? _tokenizer?.Decode(ids) ?? "";
        return new GenerationResult(state.PromptIds, ids, text, state.Finish ?? "length");
    }

    public void Dispose() => _runner.Dispose();
}
