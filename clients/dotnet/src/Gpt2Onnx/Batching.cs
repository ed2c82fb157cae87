// Batches as the graphs take them (left padding, the position-id rule) and picking tokens from logits.
// Row-major (rows, cols) long[] buffers, the layout of the graphs' int64 inputs.
namespace Gpt2Onnx;

/// <summary>Left padding, the position-id rule and picking tokens from logits, on row-major buffers.</summary>
public static class Batching
{
    /// <summary>Left-pad to the longest sequence: every row's last real token sits in the last column, so prefill's
    /// last-position logits serve every row. Returns input_ids and attention_mask, both (B, T).</summary>
    public static (long[] Ids, long[] Mask, int Width) LeftPad(IReadOnlyList<long[]> sequences, long padId)
    {
        if (sequences.Count == 0 || sequences.Any(s => s.Length == 0))
        {
            throw new ArgumentException("every sequence needs at least one token");
        }
        int width = sequences.Max(s => s.Length);
        var ids = new long[sequences.Count * width];
        var mask = new long[sequences.Count * width];
        for (int row = 0; row < sequences.Count; row++)
        {
            int start = row * width + (width - sequences[row].Length);  // padding fills the left
            Array.Fill(ids, padId, row * width, width - sequences[row].Length);
            sequences[row].CopyTo(ids, start);
            Array.Fill(mask, 1L, start, sequences[row].Length);
        }
        return (ids, mask, width);
    }

    /// <summary>position_ids = cumsum(attention_mask) - 1 per row, 0 at padding (ignored there); the last
    /// <paramref name="lastN"/> columns of a (rows, cols) mask: (rows, lastN).</summary>
    public static long[] PositionIds(long[] mask, int rows, int lastN)
    {
        int cols = mask.Length / rows;
        var positions = new long[rows * lastN];
        for (int row = 0; row < rows; row++)
        {
            long seen = 0;  // running cumsum of the mask
            for (int col = 0; col < cols; col++)
            {
                long real = mask[row * cols + col];
                seen += real;
                int outCol = col - (cols - lastN);
                if (outCol >= 0)
                {
                    positions[row * lastN + outCol] = real != 0 ? seen - 1 : 0;
                }
            }
        }
        return positions;
    }

    /// <summary>(rows, cols) mask → (rows, cols + 1) with a 1 appended to each row.</summary>
    public static long[] AppendOnes(long[] mask, int rows)
    {
        int cols = mask.Length / rows;
        var grown = new long[rows * (cols + 1)];
        for (int row = 0; row < rows; row++)
        {
            Array.Copy(mask, row * cols, grown, row * (cols + 1), cols);
            grown[row * (cols + 1) + cols] = 1;
        }
        return grown;
    }

    /// <summary>Index of the largest value; the first on ties, as numpy.argmax.</summary>
    public static int Argmax(ReadOnlySpan<float> values)
    {
        int best = 0;
        for (int i = 1; i < values.Length; i++)
        {
            if (values[i] > values[best])
            {
                best = i;
            }
        }
        return best;
    }

    /// <summary>The k largest values' indices, largest first (lower index first on ties).</summary>
    public static long[] TopK(float[] values, int k) =>
        Enumerable.Range(0, values.Length).OrderByDescending(i => values[i]).ThenBy(i => i).Take(k)
            .Select(i => (long)i).ToArray();
}
