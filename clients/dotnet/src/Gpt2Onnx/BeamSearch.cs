// Beam search over the KV cache, the Python runtime's (runtimes/gpt2_onnx_runtimes/beam_search.py and
// beam_generation.py, equal to transformers' GenerationMixin._beam_search):
//
//   prefill (P prompts, left-padded) ─► cache rows expanded to P·K (row p·K + k ← p)
//   step:  log-softmax of each beam's logits ─► processors ─► candidates = running score + log p; at the first step
//          only beam 0 counts; each prompt keeps its best max(2, 1 + n_eos)·K (ties: lower beam, then token)
//          a candidate "hits" when its token is end-of-text or it reaches MaxNewTokens; hits among the best K become
//          finished hypotheses scored sum(log p) / length ** LengthPenalty (each prompt keeps its K best); the best
//          K that did not hit run on; the cache rows are reordered by parent beam
//   stop:  a prompt stops once it has K finished and EarlyStopping is Stop, or no running beam can beat its worst
//          finished one; the search ends when every prompt has stopped or every candidate hits
namespace Gpt2Onnx;

internal static class BeamSearch
{
    private const double NotFull = -1.0e9;  // transformers' worst finished score while a prompt has fewer than K

    private sealed record Hypothesis(long[] Tokens, double Score);

    // The search's state across steps, rows prompt-major (row p·K + k is prompt p's beam k).
    private sealed class SearchState
    {
        public SearchState(int count, int k)
        {
            K = k;
            Running = new List<long>[count * k];
            for (int r = 0; r < Running.Length; r++)
            {
                Running[r] = [];
            }
            Scores = new double[count * k];
            Finished = new List<Hypothesis>[count];
            for (int p = 0; p < count; p++)
            {
                Finished[p] = [];
            }
            Stopped = new bool[count];
        }

        public int K { get; }
        public List<long>[] Running { get; }         // (P·K): each running beam's new tokens
        public double[] Scores { get; }              // (P·K): cumulative log-probabilities
        public List<Hypothesis>[] Finished { get; }  // (P): best first, at most K each
        public bool[] Stopped { get; }               // (P)
    }

    public static IReadOnlyList<GenerationResult> Run(Gpt2Model model, IReadOnlyList<long[]> prompts,
        GenerationOptions options)
    {
        options.Validate();
        model.CheckPrompts(prompts, options);
        int k = options.NumBeams, count = prompts.Count, rows = count * k, vocab = model.Manifest.VocabSize;
        long eos = options.StopAtEndOfText ? model.EndOfTextId : -1;
        (long[] ids, long[] mask, int width) = Batching.LeftPad(prompts, model.PadTokenId);
        using var runner = new KvRunner(model.Sessions, width + options.MaxNewTokens);
        runner.Start(ids, mask, count, rows);
        var processors = new LogitsProcessors(options, model.EndOfTextId);
        var state = new SearchState(count, k);
        var logProbs = new double[rows * vocab];
        for (int length = 1; ; length++)
        {
            LogSoftmax(runner.LogitsArray, logProbs, rows, vocab);
            ApplyProcessors(processors, logProbs, runner.LogitsArray, prompts, state.Running, k, vocab);
            (int[] parents, long[] chosen, bool allHit) = ChooseNext(state, logProbs, length, eos, vocab, options);
            UpdateStopped(state.Stopped, state.Finished, state.Scores, k, length, options);
            if (state.Stopped.All(s => s) || allHit)
            {
                break;
            }
            var sources = new int[rows];
            for (int r = 0; r < rows; r++)
            {
                sources[r] = r / k * k + parents[r];
            }
            runner.Reorder(sources);
            runner.Advance(chosen);
        }
        return Results(model, prompts, state.Finished, eos);
    }

    // One step for every prompt: its best candidates, those that hit (end-of-text, or MaxNewTokens reached) among the
    // best K finished, the best K that did not hit run on. Returns each row's parent beam and token, and whether
    // every candidate hit.
    private static (int[] Parents, long[] Chosen, bool AllHit) ChooseNext(SearchState state, double[] logProbs,
        int length, long eos, int vocab, GenerationOptions options)
    {
        int k = state.K, rows = state.Scores.Length;
        int keep = 2 * k;  // max(2, 1 + number of end-of-text ids) · K, as transformers keeps
        var parents = new int[rows];
        var chosen = new long[rows];
        bool allHit = true;
        for (int p = 0; p < state.Stopped.Length; p++)
        {
            var candidates = Candidates(logProbs, state.Scores, p, k, vocab, keep, first: length == 1);
            bool[] hits = candidates.Select(c => c.Token == eos || length >= options.MaxNewTokens).ToArray();
            allHit &= hits.All(h => h);
            if (!state.Stopped[p])
            {
                Finish(state.Finished[p], candidates, hits, state.Running, p, k, length, options.LengthPenalty);
            }
            RunOn(candidates, hits, p, k, parents, chosen, state.Scores);
        }
        var previous = (List<long>[])state.Running.Clone();
        for (int r = 0; r < rows; r++)  // the running beams' token lists follow their parents
        {
            state.Running[r] = [.. previous[r / k * k + parents[r]], chosen[r]];
        }
        return (parents, chosen, allHit);
    }

    // Each prompt's best finished hypothesis; "eos" where it ends in end-of-text.
    private static List<GenerationResult> Results(Gpt2Model model, IReadOnlyList<long[]> prompts,
        List<Hypothesis>[] finished, long eos) =>
        Enumerable.Range(0, prompts.Count).Select(p =>
        {
            if (finished[p].Count == 0)
            {
                throw new InvalidOperationException($"beam search ended with no finished hypothesis for prompt {p}");
            }
            long[] tokens = finished[p][0].Tokens;
            string reason = tokens.Length > 0 && tokens[^1] == eos ? "eos" : "length";
            return new GenerationResult(prompts[p], tokens, model.Tokenizer.Decode(tokens), reason);
        }).ToList();

    // Log-softmax per row in double: log p = x - (max + log sum exp(x - max)).
    private static void LogSoftmax(float[] logits, double[] output, int rows, int vocab)
    {
        for (int r = 0; r < rows; r++)
        {
            ReadOnlySpan<float> row = logits.AsSpan(r * vocab, vocab);
            double max = double.NegativeInfinity, total = 0;
            foreach (float x in row)
            {
                max = Math.Max(max, x);
            }
            foreach (float x in row)
            {
                total += Math.Exp(x - max);
            }
            double lse = max + Math.Log(total);
            for (int v = 0; v < vocab; v++)
            {
                output[r * vocab + v] = row[v] - lse;
            }
        }
    }

    // The processors see each beam's own history (prompt + its tokens); they run on float scores, as the logits do.
    private static void ApplyProcessors(LogitsProcessors processors, double[] logProbs, float[] scratch,
        IReadOnlyList<long[]> prompts, List<long>[] running, int k, int vocab)
    {
        if (!processors.Any)
        {
            return;
        }
        for (int r = 0; r < running.Length; r++)
        {
            var history = new RowHistory(prompts[r / k], prompts[r / k].Length + running[r].Count);
            running[r].ForEach(history.Add);
            for (int v = 0; v < vocab; v++)
            {
                scratch[r * vocab + v] = (float)logProbs[r * vocab + v];
            }
            processors.Apply(scratch, r * vocab, history);
            for (int v = 0; v < vocab; v++)
            {
                logProbs[r * vocab + v] = scratch[r * vocab + v];
            }
        }
    }

    private readonly record struct Candidate(int Beam, long Token, double Score, double LogProb);

    // Prompt p's best `keep` (beam, token) continuations by total score; ties: lower beam, then token.
    private static Candidate[] Candidates(double[] logProbs, double[] scores, int p, int k, int vocab, int keep,
        bool first)
    {
        int beams = first ? 1 : k;  // every beam holds the prompt at the first step: beam 0's alone count
        var best = new PriorityQueue<Candidate, (double, int, long)>();
        for (int b = 0; b < beams; b++)
        {
            int row = p * k + b;
            for (int v = 0; v < vocab; v++)
            {
                double lp = logProbs[row * vocab + v], total = lp + scores[row];
                var candidate = new Candidate(b, v, total, lp);
                // The queue's minimum is the worst kept: lowest score, then highest beam, then highest token.
                var priority = (total, -b, (long)-v);
                if (best.Count < keep)
                {
                    best.Enqueue(candidate, priority);
                }
                else if (best.TryPeek(out _, out var worst) && priority.CompareTo(worst) > 0)
                {
                    best.DequeueEnqueue(candidate, priority);
                }
            }
        }
        return best.UnorderedItems.Select(e => e.Element)
            .OrderByDescending(c => c.Score).ThenBy(c => c.Beam).ThenBy(c => c.Token).ToArray();
    }

    private static void Finish(List<Hypothesis> found, Candidate[] candidates, bool[] hits, List<long>[] running,
        int p, int k, int length, double lengthPenalty)
    {
        for (int j = 0; j < k && j < candidates.Length; j++)
        {
            if (hits[j])
            {
                Candidate c = candidates[j];
                long[] tokens = [.. running[p * k + c.Beam], c.Token];
                found.Add(new Hypothesis(tokens, c.Score / Math.Pow(length, lengthPenalty)));
            }
        }
        List<Hypothesis> best = found.OrderByDescending(h => h.Score).Take(k).ToList();
        found.Clear();
        found.AddRange(best);
    }

    // Each prompt's K best candidates that did not hit run on (all hit: the hits, in score order, fill the rest).
    private static void RunOn(Candidate[] candidates, bool[] hits, int p, int k, int[] parents, long[] chosen,
        double[] scores)
    {
        int[] order = Enumerable.Range(0, candidates.Length).OrderBy(j => hits[j]).ThenBy(j => j).Take(k).ToArray();
        for (int j = 0; j < k; j++)
        {
            Candidate c = candidates[order[j]];
            parents[p * k + j] = c.Beam;
            chosen[p * k + j] = c.Token;
            scores[p * k + j] = c.Score;
        }
    }

    private static void UpdateStopped(bool[] stopped, List<Hypothesis>[] finished, double[] scores, int k, int length,
        GenerationOptions options)
    {
        bool never = options.EarlyStopping == EarlyStopping.Never && options.LengthPenalty > 0;
        int bestLength = never ? options.MaxNewTokens : length;
        for (int p = 0; p < stopped.Length; p++)
        {
            bool full = finished[p].Count >= k;
            if (stopped[p] || (full && options.EarlyStopping == EarlyStopping.Stop))
            {
                stopped[p] = true;
                continue;
            }
            double bestPossible = scores[p * k] / Math.Pow(bestLength, options.LengthPenalty);
            double worst = full ? finished[p].Min(h => h.Score) : NotFull;
            stopped[p] = !(bestPossible > worst);
        }
    }
}
