// One sampled token, the procedure every gpt2-onnx client follows (clients/js/src/sampling.js, docs/dotnet.md
// "Sampling"), so that one seed gives the same ids in C#, C++ and JavaScript:
//
//   order     token ids by score, highest first, lower id first on ties
//   top-k     keep the k highest and any tied with the k-th (k = 0: all)
//   softmax   weights exp(score / T - top / T) in double, summed in that order
//   top-p     keep the shortest prefix whose weight sum / total reaches top_p (at least one token)
//   min-p     (an addition, off at 0) then keep the prefix whose weights are >= min_p × the first's
//   draw      one uniform u; the first kept token at which the running sum of weight / kept mass exceeds u
//
// Scores are the logits after the logits processors (repetition penalty and the others; none by default).
namespace Gpt2Onnx;

/// <summary>The sampling procedure over one row of scores, with buffers reused across steps (one per generation
/// row; not shared between threads).</summary>
internal sealed class TokenSampler
{
    private readonly int[] _order;
    private readonly double[] _weights;
    private readonly ScoreOrder _comparer = new();

    public TokenSampler(int vocab)
    {
        _order = new int[vocab];
        _weights = new double[vocab];
    }

    /// <summary>The token the procedure picks from <paramref name="scores"/> (V) for the uniform <paramref name="u"/>.</summary>
    public int Sample(float[] scores, int offset, double temperature, int topK, double topP, double minP, double u)
    {
        int vocab = _order.Length;
        for (int i = 0; i < vocab; i++)
        {
            _order[i] = i;
        }
        _comparer.Set(scores, offset);
        Array.Sort(_order, _comparer);
        int kept = vocab;
        if (topK > 0 && topK < vocab)
        {
            float kth = scores[offset + _order[topK - 1]];
            kept = topK;
            while (kept < vocab && scores[offset + _order[kept]] == kth)
            {
                kept++;
            }
        }
        double top = scores[offset + _order[0]] / temperature, total = 0;
        for (int i = 0; i < kept; i++)
        {
            total += _weights[i] = Math.Exp(scores[offset + _order[i]] / temperature - top);
        }
        int nucleus = 0;
        double mass = 0;
        while (nucleus < kept && (nucleus == 0 || mass / total < topP))
        {
            mass += _weights[nucleus++];
        }
        if (minP > 0)
        {
            int floor = 1;  // the most likely token always stays
            while (floor < nucleus && _weights[floor] >= minP * _weights[0])
            {
                floor++;
            }
            nucleus = floor;
            mass = 0;
            for (int i = 0; i < nucleus; i++)
            {
                mass += _weights[i];
            }
        }
        double running = 0;
        for (int i = 0; i < nucleus; i++)
        {
            running += _weights[i] / mass;
            if (u < running)
            {
                return _order[i];
            }
        }
        return _order[nucleus - 1];
    }

    /// <summary>Highest score first, lower id first on ties (a comparer object: no delegate per sort).</summary>
    private sealed class ScoreOrder : IComparer<int>
    {
        private float[] _scores = [];
        private int _offset;

        public void Set(float[] scores, int offset) => (_scores, _offset) = (scores, offset);

        public int Compare(int a, int b)
        {
            float x = _scores[_offset + a], y = _scores[_offset + b];
            return x > y ? -1 : x < y ? 1 : a.CompareTo(b);
        }
    }
}
