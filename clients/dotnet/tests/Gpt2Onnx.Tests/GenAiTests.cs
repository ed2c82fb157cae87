// The onnxruntime-genai path, a test class of its own: each fixture's genai_config.json runs under
// Microsoft.ML.OnnxRuntimeGenAI and reproduces the expected greedy ids (up to the first end-of-text, where genai
// stops).
using System.Text.Json;
using Microsoft.ML.OnnxRuntimeGenAI;
using Xunit;

namespace Gpt2Onnx.Tests;

public class GenAiTests
{
    public static IEnumerable<object[]> Exports() => Fixtures.Exports();

    [Theory]
    [MemberData(nameof(Exports))]
    public void GenAiReproducesTheGreedyIds(string name)
    {
        string folder = Fixtures.Folder(name);
        long eos = Manifest.Read(folder).EosTokenId ?? 50256;
        using var config = new Config(folder);  // reads genai_config.json
        using var model = new Model(config);
        using var tokenizer = new Tokenizer(model);
        foreach (JsonElement prompt in Fixtures.Expectations(name).GetProperty("prompts").EnumerateArray())
        {
            long[] promptIds = Fixtures.Longs(prompt.GetProperty("ids"));
            long[] expected = Fixtures.Longs(prompt.GetProperty("greedy").GetProperty("ids"));
            int at = Array.IndexOf(expected, eos);
            expected = at < 0 ? expected : expected[..(at + 1)];

            using Sequences encoded = tokenizer.Encode(prompt.GetProperty("text").GetString()!);
            Assert.Equal(promptIds, encoded[0].ToArray().Select(id => (long)id).ToArray());

            using var generatorParams = new GeneratorParams(model);
            generatorParams.SetSearchOption("max_length", promptIds.Length + expected.Length);
            generatorParams.SetSearchOption("do_sample", false);
            using var generator = new Generator(model, generatorParams);
            generator.AppendTokenSequences(encoded);
            while (!generator.IsDone())
            {
                generator.GenerateNextToken();
            }
            long[] generated = generator.GetSequence(0).ToArray()[promptIds.Length..].Select(t => (long)t).ToArray();
            Assert.Equal(expected, generated);
        }
    }
}
