// The golden check, as clients/cpp/src/golden_check.cpp and runtimes/golden_check.py do it: for each case, prefill
// the prompt and decode greedily for as many steps as the golden continuation has (end of text not special), and
// require the same ids; the prompt's top-5 logits must match within the case's tolerance (else the file's); the last
// step's logits through the KV cache must equal those recomputed without it; then all cases as one left-padded batch.
namespace Gpt2Onnx.Sample;

/// <summary>Every comparison is made and printed; failures are counted, never cut short.</summary>
public sealed class Report
{
    public int Passed { get; private set; }
    public int Failed { get; private set; }

    public void Add(bool ok, string line)
    {
        if (ok) Passed++; else Failed++;
        Console.WriteLine($"  {(ok ? "ok  " : "FAIL")}  {line}");
    }
}

public static class GoldenCheck
{
    /// <summary>Greedy decoding of left-padded prompts: the chosen ids (B, steps), the prompts' last-position logits
    /// and the logits the last token was chosen from, both (B, V).</summary>
    public static (long[][] Tokens, float[] FirstLogits, float[] LastLogits) Greedy(
        ExportSessions sessions, IReadOnlyList<long[]> prompts, int steps, long padId)
    {
        int batch = prompts.Count, vocab = sessions.Manifest.VocabSize;
        var (ids, mask, _) = Batching.LeftPad(prompts, padId);  // (B, T)
        using var runner = new KvRunner(sessions);
        float[] logits = runner.Prefill(ids, mask, batch);  // (B, V)
        float[] first = logits;
        var tokens = Enumerable.Range(0, batch).Select(_ => new List<long>()).ToArray();
        for (int step = 0; step < steps; step++)
        {
            var next = new long[batch];
            for (int row = 0; row < batch; row++)
            {
                next[row] = Batching.Argmax(logits.AsSpan(row * vocab, vocab));
                tokens[row].Add(next[row]);
            }
            if (step == steps - 1)
            {
                break;
            }
            mask = Batching.AppendOnes(mask, batch);  // (B, P + 1)
            logits = runner.Step(next, mask);         // (B, V)
        }
        return (tokens.Select(t => t.ToArray()).ToArray(), first, logits);
    }

    /// <returns>Each case's greedy tokens, one prompt at a time (the caller prints case 0 as text).</returns>
    public static long[][] Run(ExportSessions sessions, Golden golden, bool batch, Report report)
    {
        int vocab = sessions.Manifest.VocabSize;
        var alone = new long[golden.Cases.Count][];
        for (int i = 0; i < golden.Cases.Count; i++)
        {
            GoldenCase c = golden.Cases[i];
            string name = $"case {i}";
            Console.WriteLine($"{name} \"{c.Prompt}\" ({c.InputIds.Length} prompt tokens)");
            var (tokens, first, last) = Greedy(sessions, [c.InputIds], c.GreedyIds.Length, 0);
            alone[i] = tokens[0];
            double atol = golden.AtolFor(c);
            CompareTokens(report, name, tokens[0], c, atol);
            CompareTop5(report, name, first, c, atol);
            CompareWithRecompute(report, name, sessions, c, tokens[0], last, atol);
        }
        if (!batch || golden.Cases.Count < 2)
        {
            return alone;
        }
        // Left padding must not change any row: padded positions are masked and their position ids ignored.
        long pad = sessions.Manifest.PadTokenId ?? sessions.Manifest.EosTokenId ?? 0;
        int steps = golden.Cases.Max(c => c.GreedyIds.Length);
        Console.WriteLine($"all {golden.Cases.Count} cases as one left-padded batch");
        var result = Greedy(sessions, golden.Cases.Select(c => c.InputIds).ToList(), steps, pad);
        for (int i = 0; i < golden.Cases.Count; i++)
        {
            GoldenCase c = golden.Cases[i];
            CompareTokens(report, $"batch row {i}", result.Tokens[i][..c.GreedyIds.Length], c, golden.AtolFor(c));
            CompareTop5(report, $"batch row {i}", result.FirstLogits[(i * vocab)..((i + 1) * vocab)], c,
                golden.AtolFor(c));
        }
        return alone;
    }

    // Tokens must equal the golden ones, except that at a near-tie step (the golden margin between the chosen token
    // and the runner-up within 2 × atol) they may diverge; nothing after a divergence is compared
    // (gpt2_onnx/golden.py, greedy_agreement).
    private static void CompareTokens(Report report, string name, long[] got, GoldenCase c, double atol)
    {
        long[] expected = c.GreedyIds;
        for (int step = 0; step < expected.Length; step++)
        {
            if (step < got.Length && got[step] == expected[step])
            {
                continue;
            }
            if (step < got.Length && step < c.GreedyMargins.Length && c.GreedyMargins[step] <= 2 * atol)
            {
                report.Add(true, $"{name}: {step} tokens match, then a near-tie at step {step} "
                    + $"(margin {c.GreedyMargins[step]:G3} <= 2 x tol)");
                return;
            }
            report.Add(false, $"{name}: tokens differ at step {step}: got [{string.Join(' ', got)}], "
                + $"expected [{string.Join(' ', expected)}]");
            return;
        }
        report.Add(got.Length == expected.Length, $"{name}: {expected.Length} greedy tokens match"
            + (got.Length == expected.Length ? "" : ", but more were produced"));
    }

    private static void CompareTop5(Report report, string name, float[] logits, GoldenCase c, double atol)
    {
        // The ranks must agree up to ties within the tolerance: at every rank, the expected id's logit lies within
        // 2 × atol of the logit holding that rank here (fp32's few roundings: the exact order but for true ties;
        // reduced precisions may swap near-ties).
        long[] top = Batching.TopK(logits, c.Top5Ids.Length);
        bool sameIds = top.SequenceEqual(c.Top5Ids);
        bool ranksAgree = top.Length == c.Top5Ids.Length
            && top.Select((id, k) => Math.Abs((double)logits[c.Top5Ids[k]] - logits[id]) <= 2 * atol).All(ok => ok);
        report.Add(ranksAgree, $"{name}: top-5 ids [{string.Join(' ', top)}]"
            + (sameIds ? "" : $", expected [{string.Join(' ', c.Top5Ids)}]")
            + (ranksAgree && !sameIds ? " (near-ties within 2x tol)" : ""));
        double worst = c.Top5Ids.Select((id, k) => Math.Abs((double)logits[id] - c.Top5Logits[k])).Max();
        report.Add(worst <= atol, $"{name}: top-5 logits max|d| {worst:G3} (tol {atol:G3})");
    }

    // Holds for any weights, so it catches a broken cache even where a random model repeats one token.
    private static void CompareWithRecompute(Report report, string name, ExportSessions sessions, GoldenCase c,
        long[] tokens, float[] lastLogits, double atol)
    {
        if (tokens.Length < 2)
        {
            return;  // no decode step was taken
        }
        long[] sequence = [.. c.InputIds, .. tokens[..^1]];  // (T + steps - 1)
        using var fresh = new KvRunner(sessions);
        float[] expected = fresh.Prefill(sequence, Enumerable.Repeat(1L, sequence.Length).ToArray(), 1);
        double worst = expected.Select((v, k) => Math.Abs((double)lastLogits[k] - v)).Max();
        report.Add(worst <= atol, $"{name}: step {tokens.Length - 1} logits via the KV cache vs recomputed, "
            + $"max|d| {worst:G3} (tol {atol:G3})");
    }
}
