// Choosing the next token from one row's logits: greedy (argmax) or seeded sampling with temperature, top-k, top-p.
//
// RNG: System.Random(seed), one per generate call, drawing one NextDouble() per sampled token, rows in order.
// The same seed, options and export give the same tokens on every run of the same .NET runtime; the draws do not
// equal Python's (numpy/torch) for the same seed, and no cross-language equality is claimed.
namespace Gpt2Onnx;

/// <summary>How to generate. Greedy unless DoSample; Seed null draws a fresh seed (not reproducible).</summary>
public sealed record GenerationOptions
{
    public int MaxNewTokens { get; init; } = 16;
    public bool DoSample { get; init; }
    public float Temperature { get; init; } = 1.0f;
    public int TopK { get; init; }          // 0: no top-k filter
    public float TopP { get; init; } = 1.0f; // 1: no nucleus filter
    public int? Seed { get; init; }
    public bool StopAtEndOfText { get; init; } = true;

    internal void Check()
    {
        if (MaxNewTokens < 1)
        {
            throw new ArgumentOutOfRangeException(nameof(MaxNewTokens), "needs at least one new token");
        }
        if (DoSample && (!(Temperature > 0) || TopK < 0 || !(TopP > 0 && TopP <= 1)))
        {
            throw new ArgumentOutOfRangeException(nameof(Temperature),
                "sampling needs temperature > 0, top_k >= 0 and 0 < top_p <= 1");
        }
    }
}

public sealed class TokenChooser(GenerationOptions options)
{
    private readonly GenerationOptions _options = options;
    private readonly Random _random = new(options.Seed ?? Random.Shared.Next());

    public long Choose(ReadOnlySpan<float> logits) =>  // logits: (V)
        _options.DoSample ? Sample(logits) : Batching.Argmax(logits);

    private long Sample(ReadOnlySpan<float> logits)
    {
        // Candidates, largest logit first (lower id first on ties), cut to top-k.
        int[] order = Enumerable.Range(0, logits.Length).ToArray();
        float[] scaled = new float[logits.Length];
        for (int i = 0; i < logits.Length; i++)
        {
            scaled[i] = logits[i] / _options.Temperature;
        }
        Array.Sort(order, (a, b) => scaled[b] != scaled[a] ? scaled[b].CompareTo(scaled[a]) : a.CompareTo(b));
        int keep = _options.TopK > 0 ? Math.Min(_options.TopK, order.Length) : order.Length;

        // Softmax over the kept candidates (in double, shifted by the largest).
        double max = scaled[order[0]], total = 0;
        double[] probs = new double[keep];
        for (int i = 0; i < keep; i++)
        {
            probs[i] = Math.Exp(scaled[order[i]] - max);
            total += probs[i];
        }
        // Top-p: the smallest prefix whose probability reaches top_p (at least one token).
        double cumulative = 0;
        int nucleus = keep;
        for (int i = 0; i < keep; i++)
        {
            cumulative += probs[i] / total;
            if (cumulative >= _options.TopP)
            {
                nucleus = i + 1;
                break;
            }
        }
        double mass = probs.Take(nucleus).Sum(), draw = _random.NextDouble() * mass;
        for (int i = 0; i < nucleus; i++)
        {
            draw -= probs[i];
            if (draw < 0)
            {
                return order[i];
            }
        }
        return order[nucleus - 1];
    }
}
