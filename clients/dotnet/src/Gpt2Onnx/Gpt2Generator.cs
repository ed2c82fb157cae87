// Token-by-token generation for callers that drive the loop (onnxruntime-genai's Generator has the same shape):
// creating one prefills; each Step chooses one token per row and runs the decode step after it. The decode
// benchmark times exactly this loop.
namespace Gpt2Onnx;

/// <summary>A greedy or sampled generation over a batch of token-id prompts, one step at a time. Not shared between
/// threads; several generators over one model may run at once.</summary>
public sealed class Gpt2Generator : IDisposable
{
    private readonly Generation _generation;
    private readonly long[] _last;

    internal Gpt2Generator(Gpt2Model model, IReadOnlyList<long[]> prompts, GenerationOptions options)
    {
        if (options.NumBeams > 1)
        {
            throw new ArgumentException("beam search chooses its tokens at the end: use Generate", nameof(options));
        }
        _generation = new Generation(model, prompts, options, model.Tokenizer);
        _last = new long[prompts.Count];
    }

    /// <summary>True once every row has finished (end-of-text, a stop string, or MaxNewTokens).</summary>
    public bool IsDone => _generation.Done;

    /// <summary>The seed every row samples from: the options' Seed, or the fresh one drawn for this generation where
    /// Seed is null (giving it as Seed repeats the generation). Greedy ignores it.</summary>
    public long Seed => _generation.Seed;

    /// <summary>Rows in the batch.</summary>
    public int Rows => _last.Length;

    /// <summary>The tokens the last Step chose, per row; -1 for a row that had already finished.</summary>
    public ReadOnlySpan<long> LastTokens => _last;

    /// <summary>Chooses the next token of every unfinished row and, unless all have finished, runs the decode step
    /// that follows. Allocates no managed memory on the greedy path without stop strings or processors.</summary>
    public void Step() => _generation.Step(_last);

    /// <summary>Row <paramref name="row"/>'s result so far (complete once IsDone).</summary>
    public GenerationResult GetResult(int row) => _generation.Result(row);

    /// <summary>Releases the KV cache.</summary>
    public void Dispose() => _generation.Dispose();
}
