// Checks the sample's ONNX Runtime code against fixtures/expectations.json (made by scripts/make_fixtures.py with
// the Python runtime): prompt ids, greedy ids, first-step top-5 logits, a left-padded batch.
using System.Text.Json;
using Gpt2Onnx.Sample;
using Microsoft.ML.Tokenizers;
using Xunit;

namespace Gpt2Onnx.Tests;

public class ExpectationsTests
{
    public static IEnumerable<object[]> Exports() =>
        [["pydocs-tiny-fp32"], ["pydocs-tiny-int4"]];

    private static string FixturesDir()
    {
        for (var dir = new DirectoryInfo(AppContext.BaseDirectory); dir is not null; dir = dir.Parent)
        {
            string candidate = Path.Combine(dir.FullName, "fixtures", "expectations.json");
            if (File.Exists(candidate))
            {
                return Path.GetDirectoryName(candidate)!;
            }
        }
        throw new FileNotFoundException("fixtures/expectations.json not found above " + AppContext.BaseDirectory);
    }

    private static JsonElement Expectations(string name)
    {
        using JsonDocument doc = JsonDocument.Parse(File.ReadAllText(Path.Combine(FixturesDir(), "expectations.json")));
        return doc.RootElement.GetProperty("exports").GetProperty(name).Clone();
    }

    private static long[] Longs(JsonElement e) => e.EnumerateArray().Select(x => x.GetInt64()).ToArray();

    [Theory]
    [MemberData(nameof(Exports))]
    public void TokenizerGivesThePromptIds(string name)
    {
        Tokenizer tokenizer = TiktokenTokenizer.CreateForModel("gpt2");
        foreach (JsonElement prompt in Expectations(name).GetProperty("prompts").EnumerateArray())
        {
            long[] ids = tokenizer.EncodeToIds(prompt.GetProperty("text").GetString()!).Select(i => (long)i).ToArray();
            Assert.Equal(Longs(prompt.GetProperty("ids")), ids);
        }
    }

    [Theory]
    [MemberData(nameof(Exports))]
    public void GreedyAndTop5MatchThePythonRuntime(string name)
    {
        JsonElement expect = Expectations(name);
        double atol = expect.GetProperty("logits_atol").GetDouble();
        string folder = Path.Combine(FixturesDir(), name);
        Manifest manifest = Manifest.Read(folder);
        using var sessions = new ExportSessions(folder, manifest, "cpu", 0);
        foreach (JsonElement prompt in expect.GetProperty("prompts").EnumerateArray())
        {
            JsonElement greedy = prompt.GetProperty("greedy");
            long[] expected = Longs(greedy.GetProperty("ids"));
            var (tokens, first, _) = GoldenCheck.Greedy(sessions, [Longs(prompt.GetProperty("ids"))], expected.Length, 0);
            Assert.Equal(expected, tokens[0]);
            JsonElement top5 = prompt.GetProperty("first_step_top5");
            long[] topIds = Longs(top5.GetProperty("ids"));
            float[] topLogits = top5.GetProperty("logits").EnumerateArray().Select(x => x.GetSingle()).ToArray();
            for (int k = 0; k < topIds.Length; k++)
            {
                Assert.InRange(Math.Abs(first[topIds[k]] - topLogits[k]), 0, atol);
            }
        }
    }

    [Theory]
    [MemberData(nameof(Exports))]
    public void LeftPaddedBatchMatchesThePythonRuntime(string name)
    {
        JsonElement batch = Expectations(name).GetProperty("padded_batch");
        string folder = Path.Combine(FixturesDir(), name);
        using var sessions = new ExportSessions(folder, Manifest.Read(folder), "cpu", 0);
        long[][] padded = batch.GetProperty("input_ids").EnumerateArray().Select(Longs).ToArray();
        long[][] masks = batch.GetProperty("attention_mask").EnumerateArray().Select(Longs).ToArray();
        // The prompts without their padding; GoldenCheck.Greedy pads them again on the left.
        long[][] prompts = padded.Select((row, r) => row.Where((_, c) => masks[r][c] == 1).ToArray()).ToArray();
        int steps = batch.GetProperty("max_new_tokens").GetInt32();
        var (tokens, _, _) = GoldenCheck.Greedy(sessions, prompts, steps, batch.GetProperty("pad_token_id").GetInt64());
        long[][] expected = batch.GetProperty("ids").EnumerateArray().Select(Longs).ToArray();
        for (int r = 0; r < expected.Length; r++)
        {
            Assert.Equal(expected[r], tokens[r]);
        }
    }
}
