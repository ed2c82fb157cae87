// How to generate, with the Python runtime's names and meanings (runtimes/gpt2_onnx_runtimes/options.py, which uses
// transformers' names): greedy (the default), sampling (DoSample) or beam search (NumBeams > 1). An option the chosen
// way would not read is refused rather than dropped, as the Python runtime refuses it.
namespace Gpt2Onnx;

/// <summary>Beam search's stopping rule, transformers' early_stopping: false, true or "never".</summary>
public enum EarlyStopping
{
    /// <summary>false: a prompt stops once no running beam can beat its worst finished one at the current length.</summary>
    Heuristic,
    /// <summary>true: a prompt stops as soon as it has NumBeams finished hypotheses.</summary>
    Stop,
    /// <summary>"never": as Heuristic, but judged at the longest length a beam can reach.</summary>
    Never,
}

/// <summary>How to generate. Greedy unless <see cref="DoSample"/> or <see cref="NumBeams"/> &gt; 1. Records: derive
/// variants with <c>with { ... }</c>. A model's checkpoint defaults (generation_config.json) come from
/// <see cref="Gpt2Model.Options"/>; an options object given to Generate is used exactly as it is.</summary>
public sealed record GenerationOptions
{
    /// <summary>New tokens at most (>= 1). Prompt + new tokens must fit the model's n_positions.</summary>
    public int MaxNewTokens { get; init; } = 16;
    /// <summary>Sample instead of taking the most likely token (the procedure of docs/dotnet.md, "Sampling").</summary>
    public bool DoSample { get; init; }
    /// <summary>Sampling only: logits are divided by it (> 0).</summary>
    public double Temperature { get; init; } = 1.0;
    /// <summary>Sampling only: keep the k most likely tokens and those tied with the k-th; 0 keeps every token.</summary>
    public int TopK { get; init; }
    /// <summary>Sampling only: keep the shortest most-likely-first prefix whose probability reaches it; in (0, 1].</summary>
    public double TopP { get; init; } = 1.0;
    /// <summary>Sampling only: drop tokens less likely than MinP × the most likely one's probability; in [0, 1].</summary>
    public double MinP { get; init; }
    /// <summary>Sampling only: the random generator's seed (SplitMix64's initial state), &gt;= 0; one seed gives the same
    /// tokens in the .NET, C++ and JavaScript clients, and each row of a batch draws from its own SplitMix64(seed).
    /// Null: one fresh random seed per call, as the Python runtime draws one.</summary>
    public long? Seed { get; init; }
    /// <summary>Stop at the end-of-text token (which is kept in Ids; Text leaves it out). False: Python's ignore_eos.</summary>
    public bool StopAtEndOfText { get; init; } = true;
    /// <summary>transformers' repetition_penalty (> 0; 1 is off): each token seen (prompt or generated) has its logit
    /// divided by it where positive, multiplied by it where negative. Every mode.</summary>
    public double RepetitionPenalty { get; init; } = 1.0;
    /// <summary>&gt; 0: no n-gram of this size occurs twice in a row's tokens (prompt included). Every mode.</summary>
    public int NoRepeatNgramSize { get; init; }
    /// <summary>No end-of-text before this many new tokens. Every mode.</summary>
    public int MinNewTokens { get; init; }
    /// <summary>OpenAI's presence_penalty in [-2, 2]: subtracted from each token generated at least once.</summary>
    public double PresencePenalty { get; init; }
    /// <summary>OpenAI's frequency_penalty in [-2, 2]: times how often each token was generated, subtracted.</summary>
    public double FrequencyPenalty { get; init; }
    /// <summary>Stop when the generated text contains one of these; the text is cut before it, its tokens kept
    /// (finish reason "stop"). Not with beam search.</summary>
    public IReadOnlyList<string> Stop { get; init; } = [];
    /// <summary>&gt; 1: beam search with this many beams (greedy choice per beam; not with DoSample).</summary>
    public int NumBeams { get; init; } = 1;
    /// <summary>Beam search only: a finished beam scores sum(log p) / length ** LengthPenalty.</summary>
    public double LengthPenalty { get; init; } = 1.0;
    /// <summary>Beam search only: transformers' early_stopping.</summary>
    public EarlyStopping EarlyStopping { get; init; } = EarlyStopping.Heuristic;

    /// <summary>The seed a call draws with: <see cref="Seed"/>, else one fresh random seed in [0, 2^63) (the Python
    /// runtime's seed_of).</summary>
    internal long SeedOrFresh() => Seed ?? Random.Shared.NextInt64();

    /// <summary>"greedy", "sample" or "beam_search".</summary>
    public string Mode => NumBeams > 1 ? "beam_search" : DoSample ? "sample" : "greedy";

    /// <summary>Throws ArgumentOutOfRangeException (a value out of range) or ArgumentException (an option the chosen
    /// mode would not read, or a combination not supported) with one line naming the option.</summary>
    public void Validate()
    {
        Require(MaxNewTokens >= 1, nameof(MaxNewTokens), $"must be >= 1, got {MaxNewTokens}");
        Require(!DoSample || (Temperature > 0 && double.IsFinite(Temperature)), nameof(Temperature),
            $"must be a finite number > 0 when sampling, got {Temperature}");
        Require(TopP > 0 && TopP <= 1, nameof(TopP), $"must lie in (0, 1], got {TopP}");
        Require(TopK >= 0, nameof(TopK), $"must be >= 0 (0 disables it), got {TopK}");
        Require(MinP >= 0 && MinP <= 1, nameof(MinP), $"must lie in [0, 1], got {MinP}");
        Require(Seed is null or >= 0, nameof(Seed), $"must be >= 0, got {Seed}");
        Require(RepetitionPenalty > 0 && double.IsFinite(RepetitionPenalty), nameof(RepetitionPenalty),
            $"must be a finite number > 0, got {RepetitionPenalty}");
        Require(NoRepeatNgramSize >= 0, nameof(NoRepeatNgramSize), $"must be >= 0, got {NoRepeatNgramSize}");
        Require(MinNewTokens >= 0, nameof(MinNewTokens), $"must be >= 0, got {MinNewTokens}");
        Require(Math.Abs(PresencePenalty) <= 2, nameof(PresencePenalty), $"must lie in [-2, 2], got {PresencePenalty}");
        Require(Math.Abs(FrequencyPenalty) <= 2, nameof(FrequencyPenalty), $"must lie in [-2, 2], got {FrequencyPenalty}");
        Require(Stop.All(s => s.Length > 0), nameof(Stop), "stop strings must not be empty");
        Require(NumBeams >= 1, nameof(NumBeams), $"must be >= 1, got {NumBeams}");
        Require(double.IsFinite(LengthPenalty), nameof(LengthPenalty), $"must be finite, got {LengthPenalty}");
        CheckModes();
    }

    private void CheckModes()
    {
        if (!DoSample)
        {
            string[] set = [.. SamplingOnlySet()];
            if (set.Length > 0)
            {
                throw new ArgumentException($"{string.Join(" and ", set)} apply only when sampling: set DoSample "
                    + "too, or leave them at their defaults", set[0]);
            }
        }
        if (NumBeams == 1 && (LengthPenalty != 1.0 || EarlyStopping != EarlyStopping.Heuristic))
        {
            throw new ArgumentException("LengthPenalty and EarlyStopping apply only to beam search: set NumBeams > 1",
                nameof(NumBeams));
        }
        if (NumBeams > 1 && DoSample)
        {
            throw new ArgumentException("beam sampling (DoSample with NumBeams > 1) is not supported: choose sampling "
                + "or beam search", nameof(NumBeams));
        }
        if (NumBeams > 1 && Stop.Count > 0)
        {
            throw new ArgumentException("stop strings are not supported with beam search", nameof(Stop));
        }
        if (MinNewTokens > 0 && !StopAtEndOfText)
        {
            throw new ArgumentException("MinNewTokens holds back end-of-text, which StopAtEndOfText = false already "
                + "ignores", nameof(MinNewTokens));
        }
    }

    private IEnumerable<string> SamplingOnlySet()
    {
        if (Temperature != 1.0) yield return nameof(Temperature);
        if (TopK != 0) yield return nameof(TopK);
        if (TopP != 1.0) yield return nameof(TopP);
        if (MinP != 0) yield return nameof(MinP);
        if (Seed is not null) yield return nameof(Seed);
    }

    private static void Require(bool ok, string name, string message)
    {
        if (!ok)
        {
            throw new ArgumentOutOfRangeException(name, $"{name} {message}");
        }
    }
}
