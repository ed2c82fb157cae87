// SplitMix64 (Steele, Lea and Flood, 2014), the random numbers of every gpt2-onnx client's sampling
// (clients/js/src/sampling.js): the seed is the initial state; each draw adds 0x9E3779B97F4A7C15 and mixes; a uniform
// is the top 53 bits over 2^53, in [0, 1). One seed gives the same numbers in C#, C++ and JavaScript.
namespace Gpt2Onnx;

/// <summary>A seeded SplitMix64 stream of 64-bit outputs and uniforms in [0, 1).</summary>
public sealed class SplitMix64(ulong seed)
{
    private ulong _state = seed;

    /// <summary>The next 64-bit output.</summary>
    public ulong NextUInt64()
    {
        unchecked
        {
            _state += 0x9E3779B97F4A7C15UL;
            ulong z = _state;
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9UL;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBUL;
            return z ^ (z >> 31);
        }
    }

    /// <summary>A uniform double in [0, 1) with 53 random bits: (next >> 11) / 2^53.</summary>
    public double NextUniform() => (NextUInt64() >> 11) * (1.0 / (1UL << 53));
}
