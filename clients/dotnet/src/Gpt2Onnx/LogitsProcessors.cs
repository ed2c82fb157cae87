// The logits processors, in the Python runtime's order (runtimes/gpt2_onnx_runtimes/processors.py, which follows
// transformers' GenerationMixin._get_logits_processor), each applied in place to one row's scores:
//
//   presence/frequency penalty (OpenAI's) → repetition_penalty → no_repeat_ngram_size → min_new_tokens
//
// Each row's history is its prompt's tokens then the tokens generated after them, never padding, so a row of a padded
// batch behaves as it does alone. None is active by default, and then nothing here runs.
namespace Gpt2Onnx;

/// <summary>What one row has seen: its prompt's tokens, then those generated after them (no padding).</summary>
internal sealed class RowHistory(long[] prompt, int capacity)
{
    private readonly long[] _tokens = CopyPrompt(prompt, capacity);

    public int PromptLength { get; } = prompt.Length;
    public int Count { get; private set; } = prompt.Length;
    public int NewTokens => Count - PromptLength;
    public ReadOnlySpan<long> Tokens => _tokens.AsSpan(0, Count);
    public ReadOnlySpan<long> Generated => _tokens.AsSpan(PromptLength, Count - PromptLength);

    public void Add(long token) => _tokens[Count++] = token;

    private static long[] CopyPrompt(long[] prompt, int capacity)
    {
        var tokens = new long[Math.Max(capacity, prompt.Length)];
        prompt.CopyTo(tokens, 0);
        return tokens;
    }
}

/// <summary>The processors one GenerationOptions asks for; <see cref="Any"/> false means none runs.</summary>
internal sealed class LogitsProcessors(GenerationOptions options, long endOfText)
{
    private readonly bool _penalties = options.PresencePenalty != 0 || options.FrequencyPenalty != 0;
    private readonly bool _repetition = options.RepetitionPenalty != 1.0;
    private readonly int _ngram = options.NoRepeatNgramSize;
    private readonly int _minNew = endOfText >= 0 ? options.MinNewTokens : 0;
    private readonly HashSet<long> _seen = [];  // reused: the distinct tokens of one row

    public bool Any => _penalties || _repetition || _ngram > 0 || _minNew > 0;

    /// <summary>Applies every active processor to scores[offset .. offset + V) for the row with <paramref name="history"/>.</summary>
    public void Apply(float[] scores, int offset, RowHistory history)
    {
        Span<float> row = scores.AsSpan(offset, scores.Length - offset);
        if (_penalties)
        {
            ApplyPenalties(row, history.Generated);
        }
        if (_repetition)
        {
            ApplyRepetition(row, history.Tokens);
        }
        if (_ngram > 0)
        {
            BanRepeatedNgrams(row, history.Tokens, _ngram);
        }
        if (_minNew > 0 && history.NewTokens < _minNew)
        {
            row[(int)endOfText] = float.NegativeInfinity;
        }
    }

    // logit[j] - count[j] · frequency - (count[j] > 0) · presence, count over the generated tokens only.
    private void ApplyPenalties(Span<float> row, ReadOnlySpan<long> generated)
    {
        _seen.Clear();
        foreach (long token in generated)
        {
            row[(int)token] -= (float)options.FrequencyPenalty;
            if (_seen.Add(token))
            {
                row[(int)token] -= (float)options.PresencePenalty;
            }
        }
    }

    // Each distinct token seen: divided by the penalty where >= 0, multiplied where negative (transformers').
    private void ApplyRepetition(Span<float> row, ReadOnlySpan<long> tokens)
    {
        _seen.Clear();
        float penalty = (float)options.RepetitionPenalty;
        foreach (long token in tokens)
        {
            if (_seen.Add(token))
            {
                float value = row[(int)token];
                row[(int)token] = value < 0 ? value * penalty : value / penalty;
            }
        }
    }

    // The tokens that would complete an n-gram already in the row's tokens get -inf.
    private static void BanRepeatedNgrams(Span<float> row, ReadOnlySpan<long> tokens, int n)
    {
        if (tokens.Length < n)
        {
            return;
        }
        ReadOnlySpan<long> prefix = tokens[(tokens.Length + 1 - n)..];  // (n - 1): what the next token would extend
        for (int start = 0; start + n <= tokens.Length; start++)
        {
            if (tokens.Slice(start, n - 1).SequenceEqual(prefix))
            {
                row[(int)tokens[start + n - 1]] = float.NegativeInfinity;
            }
        }
    }
}
