// The short path: onnxruntime-genai runs the export folder through its genai_config.json (model type "decoder",
// decode.onnx as its one graph) with its own tokenizer (tokenizer.json) and KV cache. Here it must reproduce the
// golden greedy continuations; it stops at end of text, so tokens are compared up to the first one.
using Microsoft.ML.OnnxRuntimeGenAI;

namespace Gpt2Onnx.Sample;

public static class GenAiPath
{
    public static void Run(string folder, string provider, Golden golden, int eosTokenId, Report report)
    {
        using var config = new Config(folder);  // reads genai_config.json
        if (provider == "cuda")
        {
            config.ClearProviders();
            config.AppendProvider("cuda");  // needs the CUDA build of the onnxruntime-genai package
        }
        using var model = new Model(config);
        using var tokenizer = new Tokenizer(model);
        for (int i = 0; i < golden.Cases.Count; i++)
        {
            GoldenCase c = golden.Cases[i];
            using Sequences prompt = tokenizer.Encode(c.Prompt);
            int[] promptIds = prompt[0].ToArray();
            report.Add(promptIds.Select(id => (long)id).SequenceEqual(c.InputIds),
                $"genai case {i}: its tokenizer gives the golden prompt ids");

            using var generatorParams = new GeneratorParams(model);
            generatorParams.SetSearchOption("max_length", promptIds.Length + c.GreedyIds.Length);
            generatorParams.SetSearchOption("do_sample", false);  // greedy
            using var generator = new Generator(model, generatorParams);
            generator.AppendTokenSequences(prompt);
            while (!generator.IsDone())
            {
                generator.GenerateNextToken();
            }
            long[] generated = generator.GetSequence(0).ToArray()[promptIds.Length..].Select(t => (long)t).ToArray();
            long[] expected = UpToEos(c.GreedyIds, eosTokenId);
            bool same = generated.SequenceEqual(expected);
            report.Add(same, $"genai case {i}: {generated.Length} tokens "
                + (same ? "match" : $"[{string.Join(' ', generated)}], expected [{string.Join(' ', expected)}]"));
            string text = tokenizer.Decode(generator.GetSequence(0)[promptIds.Length..]);
            Console.WriteLine($"    \"{c.Prompt}\" → \"{text}\"");
        }
    }

    private static long[] UpToEos(long[] ids, int eos)
    {
        int at = Array.IndexOf(ids, (long)eos);
        return at < 0 ? ids : ids[..(at + 1)];
    }
}
