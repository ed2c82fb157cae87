// Seeded sampling: reproducible for one seed (SplitMix64, the draws of the JavaScript and C++ clients; not Python's
// numpy draws), and the filters behave.
using Xunit;

namespace Gpt2Onnx.Tests;

public class SamplingTests
{
    private const string Prompt = "A list is a mutable sequence";

    private static GenerationOptions Sampled(int seed, float temperature = 1.0f, int topK = 0, float topP = 1.0f) =>
        new() { MaxNewTokens = 12, DoSample = true, Seed = seed, Temperature = temperature, TopK = topK, TopP = topP,
            StopAtEndOfText = false };

    [Fact]
    public void OneSeedGivesTheSameTokens()
    {
        using Gpt2Model model = Gpt2Model.Open(Fixtures.Folder("pydocs-micro-fp32"));
        GenerationOptions options = Sampled(1234, temperature: 1.3f, topK: 50, topP: 0.95f);
        GenerationResult first = model.Generate(Prompt, options), second = model.Generate(Prompt, options);
        Assert.Equal(12, first.Ids.Length);
        Assert.Equal(first.Ids, second.Ids);
        Assert.Equal(first.Text, second.Text);
    }

    [Fact]
    public void SeedsDiffer()
    {
        // At temperature 2 over the whole vocabulary, 8 seeds giving one and the same 12 tokens would mean the seed
        // is ignored.
        using Gpt2Model model = Gpt2Model.Open(Fixtures.Folder("pydocs-micro-fp32"));
        var runs = Enumerable.Range(0, 8).Select(s => string.Join(',', model.Generate(Prompt, Sampled(s, 2.0f)).Ids));
        Assert.True(runs.Distinct().Count() > 1);
    }

    [Fact]
    public void APromptSamplesTheSameAloneAndInABatch()
    {
        // Each row of a batch draws from its own SplitMix64(seed): a prompt's tokens do not depend on the rows
        // beside it (the same prompt twice gives the same tokens twice).
        using Gpt2Model model = Gpt2Model.Open(Fixtures.Folder("pydocs-micro-fp32"));
        string[] prompts = [Prompt, "x", "The return value of the function is", Prompt];
        GenerationOptions options = Sampled(31, temperature: 1.5f);
        IReadOnlyList<GenerationResult> together = model.GenerateBatch(prompts, options);
        for (int r = 0; r < prompts.Length; r++)
        {
            Assert.Equal(model.Generate(prompts[r], options).Ids, together[r].Ids);
        }
        Assert.Equal(together[0].Ids, together[3].Ids);
        Assert.NotEqual(together[0].Ids, together[1].Ids);
    }

    [Fact]
    public void NoSeedDrawsAFreshSeedPerCall()
    {
        // Seed null: one fresh random seed per call, as the Python runtime draws one. Over the whole vocabulary at
        // temperature 1.5, two independent runs of 32 tokens are equal with probability E[P(sequence)]: about 1e-100
        // on this fixture (the mean of P(sequence) over 200 seeded runs, each P the product of its 32 tokens' p).
        using Gpt2Model model = Gpt2Model.Open(Fixtures.Folder("pydocs-micro-fp32"));
        var options = new GenerationOptions
        {
            MaxNewTokens = 32, DoSample = true, Temperature = 1.5, StopAtEndOfText = false,
        };
        Assert.NotEqual(model.Generate(Prompt, options).Ids, model.Generate(Prompt, options).Ids);
        long[] prompt = model.Tokenizer.Encode(Prompt);
        using (Gpt2Generator generator = model.CreateGenerator([prompt], options))
        {
            while (!generator.IsDone)
            {
                generator.Step();
            }
            // The fresh seed it drew, given back as Seed, repeats it.
            Assert.InRange(generator.Seed, 0, long.MaxValue);
            Assert.Equal(generator.GetResult(0).Ids, model.Generate(Prompt, options with { Seed = generator.Seed }).Ids);
        }
        float[] logits = [MathF.Log(1), MathF.Log(6), MathF.Log(3)];
        var sampling = new GenerationOptions { DoSample = true };
        long[] draws = Enumerable.Range(0, 64).Select(_ => new TokenChooser(sampling).Choose(logits)).ToArray();
        Assert.True(draws.Distinct().Count() > 1);  // a fresh seed per chooser: all 64 alike has p < 1e-14
    }

    [Fact]
    public void TopKOfOneIsGreedy()
    {
        using Gpt2Model model = Gpt2Model.Open(Fixtures.Folder("pydocs-micro-fp32"));
        long[] greedy = model.Generate(Prompt, new GenerationOptions { MaxNewTokens = 12, StopAtEndOfText = false }).Ids;
        Assert.Equal(greedy, model.Generate(Prompt, Sampled(7, temperature: 1.5f, topK: 1)).Ids);
    }

    [Fact]
    public void TinyTopPIsGreedy()
    {
        // The nucleus always keeps the most likely token; with top_p near 0 it keeps only that one.
        using Gpt2Model model = Gpt2Model.Open(Fixtures.Folder("pydocs-micro-fp32"));
        long[] greedy = model.Generate(Prompt, new GenerationOptions { MaxNewTokens = 12, StopAtEndOfText = false }).Ids;
        Assert.Equal(greedy, model.Generate(Prompt, Sampled(7, topP: 1e-6f)).Ids);
    }

    [Fact]
    public void SamplingStaysInsideTopK()
    {
        // The chooser alone over a known distribution: with top_k = 3 only the three largest logits are drawn.
        float[] logits = [0.0f, 5.0f, 1.0f, 4.0f, 3.0f, -2.0f];
        var chooser = new TokenChooser(Sampled(99, topK: 3));
        var drawn = Enumerable.Range(0, 200).Select(_ => chooser.Choose(logits)).ToHashSet();
        Assert.Subset(new HashSet<long> { 1, 3, 4 }, drawn);
        Assert.True(drawn.Count > 1);  // at temperature 1 the three are all likely enough in 200 draws
    }

    [Fact]
    public void BadSettingsAreRefused()
    {
        using Gpt2Model model = Gpt2Model.Open(Fixtures.Folder("pydocs-micro-fp32"));
        Assert.Throws<ArgumentOutOfRangeException>(() => model.Generate(Prompt, Sampled(1, temperature: 0f)));
        Assert.Throws<ArgumentOutOfRangeException>(() => model.Generate(Prompt, Sampled(1, topP: 0f)));
        Assert.Throws<ArgumentOutOfRangeException>(() => model.Generate(Prompt, new GenerationOptions { MaxNewTokens = 0 }));
    }

    [Fact]
    public void StopsAtEndOfText()
    {
        // Prompted with end-of-text, greedy decoding of this checkpoint may or may not produce it; whatever it
        // produces, a result that ends in end-of-text says "eos" and nothing follows it, and "length" means
        // max_new_tokens ids without end-of-text.
        using Gpt2Model model = Gpt2Model.Open(Fixtures.Folder("pydocs-micro-fp32"));
        for (int seed = 0; seed < 20; seed++)
        {
            GenerationResult r = model.Generate("<|endoftext|>", Sampled(seed, temperature: 1.5f) with { StopAtEndOfText = true });
            int at = Array.IndexOf(r.Ids, model.EndOfTextId);
            if (r.FinishReason == "eos")
            {
                Assert.Equal(r.Ids.Length - 1, at);
            }
            else
            {
                Assert.Equal("length", r.FinishReason);
                Assert.Equal(-1, at);
                Assert.Equal(12, r.Ids.Length);
            }
        }
    }
}
