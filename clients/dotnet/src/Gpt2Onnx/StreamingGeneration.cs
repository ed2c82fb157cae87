// Streaming text from a generation (runtimes/gpt2_onnx_runtimes/streaming.py): pieces as tokens arrive, whole
// characters only (a character split across byte-level tokens waits for its last byte), never past a stop string
// (the end of the text that could still grow into one is held back), and the pieces join to the result's Text.
namespace Gpt2Onnx;

/// <summary>One prompt's continuation, piece by piece: call <see cref="MoveNext"/> until it returns false, read
/// <see cref="Current"/> after each true, then <see cref="Result"/>. Not shared between threads.</summary>
public sealed class StreamingGeneration : IDisposable
{
    private readonly Generation _generation;
    private readonly IncrementalDecoder _decoder;
    private readonly IReadOnlyList<string> _stops;
    private readonly long[] _chosen = new long[1];
    private string _decoded = "";  // everything the decoder has released
    private int _emitted;          // characters of _decoded already handed out
    private bool _finished;

    internal StreamingGeneration(Gpt2Model model, long[] prompt, GenerationOptions options)
    {
        if (options.NumBeams > 1)
        {
            throw new ArgumentException("beam search chooses its tokens at the end, so it cannot stream: use Generate",
                nameof(options));
        }
        _generation = new Generation(model, [prompt], options, model.Tokenizer);
        _decoder = new IncrementalDecoder(model.Tokenizer);
        _stops = options.Stop;
    }

    /// <summary>The seed the generation samples from: the options' Seed, or the fresh one drawn for it (giving it as
    /// Seed repeats the stream).</summary>
    public long Seed => _generation.Seed;

    /// <summary>The piece the last successful MoveNext produced.</summary>
    public string Current { get; private set; } = "";

    /// <summary>The result (complete once MoveNext has returned false).</summary>
    public GenerationResult Result => _generation.Result(0);

    /// <summary>Runs generation steps until a non-empty piece is ready (true) or the generation has ended and
    /// everything was handed out (false). Checks <paramref name="cancellationToken"/> before every step.</summary>
    public bool MoveNext(CancellationToken cancellationToken = default)
    {
        while (!_finished)
        {
            if (_generation.Done)
            {
                _finished = true;
                return Tail();
            }
            cancellationToken.ThrowIfCancellationRequested();
            _generation.Step(_chosen);
            _decoded += _decoder.Push(_chosen[0]);
            GenerationRow row = _generation.Rows[0];
            if (row.Finish == "stop")
            {
                _finished = true;
                return Emit(row.CutText!.Length > _emitted ? row.CutText[_emitted..] : "");
            }
            int ready = _decoded.Length - HeldBack(_decoded, _stops);
            if (ready > _emitted)
            {
                string piece = _decoded[_emitted..ready];
                _emitted = ready;
                return Emit(piece);
            }
        }
        return false;
    }

    private bool Tail()
    {
        _decoded += _decoder.Flush();
        string final = Result.Text;
        string tail = final.StartsWith(_decoded[.._emitted], StringComparison.Ordinal) ? final[_emitted..]
            : _decoded[_emitted..];
        return Emit(tail);
    }

    private bool Emit(string piece)
    {
        Current = piece;
        return piece.Length > 0;
    }

    /// <summary>Length of the longest end of <paramref name="text"/> that could still grow into a stop string.</summary>
    internal static int HeldBack(string text, IReadOnlyList<string> stops)
    {
        int longest = 0;
        foreach (string stop in stops)
        {
            for (int size = Math.Min(stop.Length - 1, text.Length); size > longest; size--)
            {
                if (text.AsSpan(text.Length - size).SequenceEqual(stop.AsSpan(0, size)))
                {
                    longest = size;
                    break;
                }
            }
        }
        return longest;
    }

    /// <summary>Releases the generation's cache.</summary>
    public void Dispose() => _generation.Dispose();
}

/// <summary>Token ids to text pieces, holding back the bytes of a character split across tokens (the prefix/read
/// offsets of vLLM and text-generation-inference): only text that decodes completely is released.</summary>
internal sealed class IncrementalDecoder(Gpt2Tokenizer tokenizer)
{
    private const char Replacement = '\uFFFD';  // what a byte-level decoder yields for an incomplete character
    private readonly List<long> _ids = [];
    private int _prefix, _read;

    public string Push(long id)
    {
        _ids.Add(id);
        string before = Decode(_prefix, _read), after = Decode(_prefix, _ids.Count);
        if (after.Length > before.Length && after[^1] != Replacement)
        {
            (_prefix, _read) = (_read, _ids.Count);
            return after[before.Length..];
        }
        return "";
    }

    public string Flush()
    {
        string before = Decode(_prefix, _read), after = Decode(_prefix, _ids.Count);
        _prefix = _read = _ids.Count;
        return after.Length > before.Length ? after[before.Length..] : "";
    }

    private string Decode(int start, int end) => tokenizer.Decode(_ids.GetRange(start, end - start));
}
