// The API the first version of docs/dotnet.md documented, written as its callers wrote it: it must still compile and
// run. GenerationOptions' Temperature/TopP are double and Seed is long? now (docs/dotnet.md, "Changes from the first
// version"): assigning a float or an int (or int?) still compiles, which is what these lines check.
using System.Text.Json;
using Xunit;

namespace Gpt2Onnx.Tests;

public class ApiCompatibilityTests
{
    [Fact]
    public void TheFirstVersionsDocumentedCallsStillWork()
    {
        using Gpt2Model model = Gpt2Model.Open(Fixtures.Folder("pydocs-micro-fp32"), new Gpt2ModelOptions
        {
            Provider = "cpu", DeviceId = 0, ShareWeights = true, VerifyFiles = true,
        });
        GenerationResult r = model.Generate("The return value of the function is",
            new GenerationOptions { MaxNewTokens = 16 });
        Assert.Equal("length", r.FinishReason);
        var sampled = model.Generate("import os", new GenerationOptions {
            MaxNewTokens = 32, DoSample = true, Temperature = 0.8f, TopK = 40, TopP = 0.95f, Seed = 1234 });
        Assert.InRange(sampled.Ids.Length, 1, 32);
        IReadOnlyList<GenerationResult> rows = model.GenerateBatch(["a", "longer prompt"]);
        Assert.Equal(2, rows.Count);
        long[][] ids = model.GenerateIds([r.PromptIds], new GenerationOptions { MaxNewTokens = 4 }, out string[] why);
        Assert.Equal(r.Ids[..4], ids[0]);
        Assert.Equal("length", why[0]);
        Assert.Equal(model.Manifest.VocabSize, model.FirstStepLogits(r.PromptIds).Length);
        Assert.Equal(model.EndOfTextId, model.PadTokenId);  // the fixture names no pad token: end-of-text pads
    }

    [Fact]
    public void FloatAndIntOptionValuesStillAssign()
    {
        float temperature = 0.8f, topP = 0.95f;
        int seed = 7;
        int? maybeSeed = null;
        var options = new GenerationOptions { DoSample = true, Temperature = temperature, TopP = topP, Seed = seed };
        Assert.Equal((double)0.8f, options.Temperature);  // the float's value, widened exactly
        Assert.Equal((double)0.95f, options.TopP);
        Assert.Equal(7L, options.Seed);
        Assert.Null((options with { Seed = maybeSeed }).Seed);
        // Reading them back into the old types takes a cast (the break docs/dotnet.md lists).
        float readTemperature = (float)options.Temperature;
        int? readSeed = (int?)options.Seed;
        Assert.Equal((0.8f, 7), (readTemperature, readSeed!.Value));
    }

    [Fact]
    public void TheLowerLevelLoopStillRuns()
    {
        // The first version's KvRunner (capacity: the model's n_positions), Batching and TokenChooser, driven by hand.
        using Gpt2Model model = Gpt2Model.Open(Fixtures.Folder("pydocs-micro-fp32"));
        JsonElement prompt = Fixtures.Expectations("pydocs-micro-fp32").GetProperty("prompts")[0];
        long[] promptIds = Fixtures.Longs(prompt.GetProperty("ids"));
        long[] expected = Fixtures.Longs(prompt.GetProperty("greedy").GetProperty("ids"));
        var (ids, mask, _) = Batching.LeftPad([promptIds], model.PadTokenId);
        using var runner = new KvRunner(model.Sessions);
        var chooser = new TokenChooser(new GenerationOptions());
        float[] logits = runner.Prefill(ids, mask, 1);
        var got = new List<long>();
        for (int step = 0; step < 4; step++)
        {
            long token = chooser.Choose(logits);
            got.Add(token);
            mask = Batching.AppendOnes(mask, 1);
            logits = runner.Step([token], mask);
        }
        Assert.Equal(expected[..4], got);
        Assert.Equal(promptIds.Length + 4, runner.PastLength);
    }
}
