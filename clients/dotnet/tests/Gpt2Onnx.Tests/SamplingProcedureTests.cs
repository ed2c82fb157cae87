// SplitMix64 against its published outputs, and the sampling procedure (TokenSampler) on hand-made logits, where
// each step of the procedure (order, ties, top-k, top-p, the draw) decides the answer.
using Xunit;

namespace Gpt2Onnx.Tests;

public class SamplingProcedureTests
{
    [Fact]
    public void SplitMix64GivesItsPublishedOutputs()
    {
        // splitmix64.c (Vigna) seeded with 1234567; and the first outputs from state 0.
        var random = new SplitMix64(1234567);
        ulong[] expected = [6457827717110365317, 3203168211198807973, 9817491932198370423, 4593380528125082431,
            16408922859458223821];
        Assert.Equal(expected, expected.Select(_ => random.NextUInt64()).ToArray());
        var zero = new SplitMix64(0);
        Assert.Equal(0xE220A8397B1DCDAFUL, zero.NextUInt64());
        Assert.Equal(0x6E789E6AA1B965F4UL, zero.NextUInt64());
        Assert.Equal((0x06C45D188009454FUL >> 11) / 9007199254740992.0, zero.NextUniform());
    }

    private static int Sample(float[] logits, double u, double temperature = 1, int topK = 0, double topP = 1,
        double minP = 0) => new TokenSampler(logits.Length).Sample(logits, 0, temperature, topK, topP, minP, u);

    [Fact]
    public void TiesOrderByLowerIdAndTheDrawTakesTheFirstRunningSumAboveU()
    {
        float[] logits = [1, 3, 3, 0, 2];  // order: 1, 2 (tie: lower id first), 4, 0, 3
        Assert.Equal(1, Sample(logits, 0.49, topK: 2));
        Assert.Equal(2, Sample(logits, 0.5, topK: 2));  // u < running sum 0.5 is false: the next token
        Assert.Equal(2, Sample(logits, 0.99, topK: 2));
        Assert.Equal(2, Sample(logits, 0.9, topK: 1));  // top-k keeps the tie with the k-th
        Assert.Equal(1, Sample(logits, 0.0));
    }

    [Fact]
    public void TopPKeepsTheShortestPrefixReachingP()
    {
        float[] logits = [MathF.Log(1), MathF.Log(6), MathF.Log(3)];  // probabilities 0.1, 0.6, 0.3
        Assert.Equal(1, Sample(logits, 0.99, topP: 0.55));  // the first token alone reaches 0.55
        Assert.Equal(2, Sample(logits, 0.99, topP: 0.65));  // 1 and 2 kept, renormalized: 2/3, 1/3
        Assert.Equal(1, Sample(logits, 0.66, topP: 0.65));
        Assert.Equal(0, Sample(logits, 0.95, topP: 1.0));   // running sums 0.6, 0.9, 1.0
        Assert.Equal(1, Sample(logits, 0.95, minP: 0.6));   // min-p: 0.3 < 0.6 × 0.6 drops 2 and 0
    }

    [Fact]
    public void TemperatureSharpensTheDistribution()
    {
        float[] logits = [MathF.Log(1), MathF.Log(6), MathF.Log(3)];
        // At temperature 0.5 the weights are squared: 1, 36, 9 → token 1 holds 36/46 ≈ 0.78.
        Assert.Equal(1, Sample(logits, 0.77, temperature: 0.5));
        Assert.Equal(2, Sample(logits, 0.79, temperature: 0.5));
    }

    [Fact]
    public void TheChooserDrawsOneUniformPerSampledToken()
    {
        float[] logits = [MathF.Log(1), MathF.Log(6), MathF.Log(3)];
        var options = new GenerationOptions { DoSample = true, Seed = 1234567 };
        var chooser = new TokenChooser(options);
        var random = new SplitMix64(1234567);
        for (int i = 0; i < 20; i++)
        {
            Assert.Equal(Sample(logits, random.NextUniform()), chooser.Choose(logits));
        }
    }
}
