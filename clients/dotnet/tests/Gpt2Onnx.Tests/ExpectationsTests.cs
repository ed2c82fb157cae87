// The library against fixtures/expectations.json (made with the Python runtime): prompt ids (one prompt is
// non-ASCII), greedy ids and text, first-step top-5 logits within logits_atol, a left-padded batch. The
// expectations' beam_search entries are checked in GenerationTests.
using System.Text.Json;
using Xunit;

namespace Gpt2Onnx.Tests;

public class ExpectationsTests
{
    public static IEnumerable<object[]> Exports() => Fixtures.Exports();

    [Theory]
    [MemberData(nameof(Exports))]
    public void TokenizerGivesThePromptIds(string name)
    {
        using Gpt2Model model = Gpt2Model.Open(Fixtures.Folder(name));
        foreach (JsonElement prompt in Fixtures.Expectations(name).GetProperty("prompts").EnumerateArray())
        {
            string text = prompt.GetProperty("text").GetString()!;
            long[] ids = model.Tokenizer.Encode(text);
            Assert.Equal(Fixtures.Longs(prompt.GetProperty("ids")), ids);
            Assert.Equal(text, model.Tokenizer.Decode(ids));  // byte-level BPE round-trips any text
        }
    }

    [Fact]
    public void OneExpectedPromptIsNonAscii()
    {
        Assert.Contains(Fixtures.Expectations("pydocs-micro-fp32").GetProperty("prompts").EnumerateArray(),
            p => p.GetProperty("text").GetString()!.Any(ch => ch > 127));
    }

    [Theory]
    [MemberData(nameof(Exports))]
    public void GreedyIdsAndTextMatch(string name)
    {
        using Gpt2Model model = Gpt2Model.Open(Fixtures.Folder(name));
        foreach (JsonElement prompt in Fixtures.Expectations(name).GetProperty("prompts").EnumerateArray())
        {
            JsonElement greedy = prompt.GetProperty("greedy");
            var options = new GenerationOptions { MaxNewTokens = greedy.GetProperty("max_new_tokens").GetInt32() };
            GenerationResult result = model.Generate(prompt.GetProperty("text").GetString()!, options);
            Assert.Equal(Fixtures.Longs(prompt.GetProperty("ids")), result.PromptIds);
            Assert.Equal(Fixtures.Longs(greedy.GetProperty("ids")), result.Ids);
            Assert.Equal(greedy.GetProperty("text").GetString(), result.Text);  // byte-exact: no trimming
            Assert.Equal(greedy.GetProperty("finish_reason").GetString(), result.FinishReason);
        }
    }

    [Theory]
    [MemberData(nameof(Exports))]
    public void FirstStepTop5LogitsMatch(string name)
    {
        JsonElement expect = Fixtures.Expectations(name);
        double atol = expect.GetProperty("logits_atol").GetDouble();
        using Gpt2Model model = Gpt2Model.Open(Fixtures.Folder(name));
        foreach (JsonElement prompt in expect.GetProperty("prompts").EnumerateArray())
        {
            float[] logits = model.FirstStepLogits(Fixtures.Longs(prompt.GetProperty("ids")));  // (V)
            Assert.Equal(model.Manifest.VocabSize, logits.Length);
            JsonElement top5 = prompt.GetProperty("first_step_top5");
            long[] ids = Fixtures.Longs(top5.GetProperty("ids"));
            float[] expected = Fixtures.Floats(top5.GetProperty("logits"));
            for (int k = 0; k < ids.Length; k++)
            {
                Assert.InRange(Math.Abs((double)logits[ids[k]] - expected[k]), 0, atol);
            }
            // Ranks agree up to near-ties within the tolerance (reduced precisions may swap those).
            long[] top = Batching.TopK(logits, ids.Length);
            for (int k = 0; k < ids.Length; k++)
            {
                Assert.InRange(Math.Abs((double)logits[top[k]] - logits[ids[k]]), 0, 2 * atol);
            }
        }
    }

    [Theory]
    [MemberData(nameof(Exports))]
    public void LeftPaddedBatchMatches(string name)
    {
        JsonElement batch = Fixtures.Expectations(name).GetProperty("padded_batch");
        using Gpt2Model model = Gpt2Model.Open(Fixtures.Folder(name));
        string[] prompts = batch.GetProperty("prompts").EnumerateArray().Select(p => p.GetString()!).ToArray();

        // The library pads as the expectations do: same input_ids and attention_mask.
        long[][] encoded = prompts.Select(model.Tokenizer.Encode).ToArray();
        var (ids, mask, width) = Batching.LeftPad(encoded, batch.GetProperty("pad_token_id").GetInt64());
        long[][] expectedIds = batch.GetProperty("input_ids").EnumerateArray().Select(Fixtures.Longs).ToArray();
        long[][] expectedMask = batch.GetProperty("attention_mask").EnumerateArray().Select(Fixtures.Longs).ToArray();
        Assert.Equal(expectedIds.SelectMany(r => r), ids);
        Assert.Equal(expectedMask.SelectMany(r => r), mask);
        Assert.Equal(expectedIds[0].Length, width);

        var options = new GenerationOptions { MaxNewTokens = batch.GetProperty("max_new_tokens").GetInt32() };
        IReadOnlyList<GenerationResult> results = model.GenerateBatch(prompts, options);
        long[][] expected = batch.GetProperty("ids").EnumerateArray().Select(Fixtures.Longs).ToArray();
        Assert.Equal(expected.Length, results.Count);
        for (int r = 0; r < expected.Length; r++)
        {
            Assert.Equal(expected[r], results[r].Ids);
        }
    }

    [Fact]
    public void PaddingDoesNotChangeARow()
    {
        // A short prompt next to a long one (real padding, unlike the fixture's equal-length pair): each row's
        // greedy ids equal those of the prompt alone.
        using Gpt2Model model = Gpt2Model.Open(Fixtures.Folder("pydocs-micro-fp32"));
        string[] prompts = ["x", "The return value of the function is"];
        var options = new GenerationOptions { MaxNewTokens = 6 };
        IReadOnlyList<GenerationResult> together = model.GenerateBatch(prompts, options);
        Assert.True(together[0].PromptIds.Length < together[1].PromptIds.Length);
        for (int r = 0; r < prompts.Length; r++)
        {
            Assert.Equal(model.Generate(prompts[r], options).Ids, together[r].Ids);
        }
    }

    [Fact]
    public void PositionIdsFollowTheManifestRule()
    {
        // cumsum(attention_mask) - 1, 0 at padding.
        long[] mask = [0, 0, 1, 1, 1, 1, 1, 1];  // (2, 4)
        Assert.Equal(new long[] { 0, 0, 0, 1, 0, 1, 2, 3 }, Batching.PositionIds(mask, 2, 4));
        Assert.Equal(new long[] { 1, 3 }, Batching.PositionIds(mask, 2, 1));
    }
}
