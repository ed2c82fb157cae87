// The token choice on its own, for callers that drive KvRunner themselves: greedy (argmax, the lowest id on ties)
// or the sampling procedure of TokenSampler with one SplitMix64 stream (seed: options.Seed, else a fresh random one).
namespace Gpt2Onnx;

/// <summary>Chooses tokens under one GenerationOptions (temperature, top-k, top-p, min-p; no logits processors,
/// which need a row's history: Generate applies them). One uniform per sampled token.</summary>
public sealed class TokenChooser
{
    private readonly GenerationOptions _options;
    private readonly SplitMix64 _random;
    private TokenSampler? _sampler;
    private float[] _row = [];

    /// <summary>A chooser whose draws come from SplitMix64(options.Seed), or from a fresh random seed where
    /// options.Seed is null.</summary>
    public TokenChooser(GenerationOptions options)
    {
        options.Validate();
        _options = options;
        _random = new SplitMix64((ulong)options.SeedOrFresh());
    }

    /// <summary>The next token for one row of logits (V).</summary>
    public long Choose(ReadOnlySpan<float> logits)
    {
        if (!_options.DoSample)
        {
            return Batching.Argmax(logits);
        }
        if (_row.Length != logits.Length)
        {
            _row = new float[logits.Length];
            _sampler = new TokenSampler(logits.Length);
        }
        logits.CopyTo(_row);
        return _sampler!.Sample(_row, 0, _options.Temperature, _options.TopK, _options.TopP, _options.MinP,
            _random.NextUniform());
    }
}
