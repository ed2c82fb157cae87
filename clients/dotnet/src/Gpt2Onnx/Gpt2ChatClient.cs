// Microsoft.Extensions.AI's IChatClient over a Gpt2Model, as onnxruntime-genai's C# package offers one
// (OnnxRuntimeGenAIChatClient): GetResponseAsync and GetStreamingResponseAsync, ChatOptions mapped onto
// GenerationOverrides over the checkpoint's defaults, usage counted in tokens.
//
// GPT-2 is a completion model with no chat template: the prompt is the text of every message, in order, joined by
// one line break, with no role markers (FormatPrompt; replace it with Gpt2ChatClientOptions.PromptFormatter). The
// reply is the model's continuation of that text.
using System.Globalization;
using System.Runtime.CompilerServices;
using Microsoft.Extensions.AI;

namespace Gpt2Onnx;

/// <summary>Settings of a <see cref="Gpt2ChatClient"/>.</summary>
public sealed record Gpt2ChatClientOptions
{
    /// <summary>Messages → prompt text; null: <see cref="Gpt2ChatClient.FormatPrompt"/>.</summary>
    public Func<IEnumerable<ChatMessage>, string>? PromptFormatter { get; init; }
    /// <summary>The model id reported in metadata and responses.</summary>
    public string ModelId { get; init; } = "gpt2-onnx";
}

/// <summary>An IChatClient that generates with a <see cref="Gpt2Model"/> (which it does not own unless asked).</summary>
public sealed class Gpt2ChatClient : IChatClient
{
    private readonly Gpt2Model _model;
    private readonly bool _ownsModel;
    private readonly Gpt2ChatClientOptions _options;
    private readonly ChatClientMetadata _metadata;

    /// <summary>A chat client over <paramref name="model"/>; <paramref name="ownsModel"/>: Dispose disposes it.</summary>
    public Gpt2ChatClient(Gpt2Model model, Gpt2ChatClientOptions? options = null, bool ownsModel = false)
    {
        _model = model;
        _ownsModel = ownsModel;
        _options = options ?? new Gpt2ChatClientOptions();
        _metadata = new ChatClientMetadata("gpt2-onnx", new Uri(Path.GetFullPath(model.Folder)), _options.ModelId);
    }

    /// <summary>The default prompt: each message's text, in order, joined by "\n"; roles are not marked.</summary>
    public static string FormatPrompt(IEnumerable<ChatMessage> messages) =>
        string.Join("\n", messages.Select(m => m.Text));

    /// <summary>ChatOptions as generation options over the checkpoint's defaults: MaxOutputTokens, Temperature (0:
    /// greedy), TopP, TopK, Seed (any of these but Temperature 0 turns sampling on), StopSequences,
    /// FrequencyPenalty, PresencePenalty. Other ChatOptions (tools, response format) are not supported and refused.</summary>
    public GenerationOptions ToGenerationOptions(ChatOptions? options)
    {
        if (options is null)
        {
            return _model.Options(new GenerationOverrides());
        }
        if (options.Tools is { Count: > 0 } || options.ResponseFormat is ChatResponseFormatJson)
        {
            throw new NotSupportedException("GPT-2 completions take no tools and no JSON response format");
        }
        bool greedy = options.Temperature == 0;
        bool sampling = !greedy && (options.Temperature is not null || options.TopP is not null
            || options.TopK is not null || options.Seed is not null);
        var given = new GenerationOverrides
        {
            MaxNewTokens = options.MaxOutputTokens,
            DoSample = greedy ? false : sampling ? true : null,
            Temperature = sampling ? AsWritten(options.Temperature) : null,
            TopP = sampling ? AsWritten(options.TopP) : null,
            TopK = sampling ? options.TopK : null,
            Seed = sampling ? options.Seed : null,
            Stop = options.StopSequences is { Count: > 0 } stops ? [.. stops] : null,
            FrequencyPenalty = AsWritten(options.FrequencyPenalty),
            PresencePenalty = AsWritten(options.PresencePenalty),
        };
        return _model.Options(given);
    }

    /// <summary>A ChatOptions float as the decimal number it was written as: 0.8f becomes 0.8, where widening gives
    /// 0.800000011920929, whose sampling weights (and top-p cut) differ from those of 0.8 in the other clients and
    /// in GenerationOptions.</summary>
    private static double? AsWritten(float? value) => value is float v
        ? double.Parse(v.ToString("R", CultureInfo.InvariantCulture), CultureInfo.InvariantCulture)
        : null;

    /// <inheritdoc />
    public async Task<ChatResponse> GetResponseAsync(IEnumerable<ChatMessage> messages, ChatOptions? options = null,
        CancellationToken cancellationToken = default)
    {
        string prompt = Prompt(messages);
        GenerationOptions generation = ToGenerationOptions(options);
        GenerationResult result = await Task.Run(() => Complete(prompt, generation, cancellationToken),
            cancellationToken).ConfigureAwait(false);
        return new ChatResponse(new ChatMessage(ChatRole.Assistant, result.Text))
        {
            FinishReason = Reason(result.FinishReason),
            ModelId = _options.ModelId,
            ResponseId = Guid.NewGuid().ToString("N"),
            CreatedAt = DateTimeOffset.UtcNow,
            Usage = Usage(result),
        };
    }

    /// <inheritdoc />
    public async IAsyncEnumerable<ChatResponseUpdate> GetStreamingResponseAsync(IEnumerable<ChatMessage> messages,
        ChatOptions? options = null, [EnumeratorCancellation] CancellationToken cancellationToken = default)
    {
        string prompt = Prompt(messages);
        GenerationOptions generation = ToGenerationOptions(options);
        string id = Guid.NewGuid().ToString("N");
        using StreamingGeneration stream = _model.Stream(prompt, generation);
        await Task.Yield();
        while (stream.MoveNext(cancellationToken))
        {
            yield return new ChatResponseUpdate(ChatRole.Assistant, stream.Current)
            {
                ResponseId = id,
                MessageId = id,
                ModelId = _options.ModelId,
            };
        }
        GenerationResult result = stream.Result;
        yield return new ChatResponseUpdate(ChatRole.Assistant, [new UsageContent(Usage(result))])
        {
            ResponseId = id,
            MessageId = id,
            ModelId = _options.ModelId,
            FinishReason = Reason(result.FinishReason),
        };
    }

    /// <inheritdoc />
    public object? GetService(Type serviceType, object? serviceKey = null) =>
        serviceKey is not null ? null
        : serviceType == typeof(ChatClientMetadata) ? _metadata
        : serviceType.IsInstanceOfType(_model) ? _model
        : serviceType.IsInstanceOfType(this) ? this
        : null;

    private string Prompt(IEnumerable<ChatMessage> messages) =>
        (_options.PromptFormatter ?? FormatPrompt)(messages);

    private GenerationResult Complete(string prompt, GenerationOptions options, CancellationToken cancellationToken)
    {
        if (options.NumBeams > 1)
        {
            return _model.Generate(prompt, options);  // beam search (from generation_config.json) does not stream
        }
        using StreamingGeneration stream = _model.Stream(prompt, options);
        while (stream.MoveNext(cancellationToken))
        {
        }
        return stream.Result;
    }

    private static ChatFinishReason Reason(string finish) =>
        finish == "length" ? ChatFinishReason.Length : ChatFinishReason.Stop;

    private static UsageDetails Usage(GenerationResult result) => new()
    {
        InputTokenCount = result.PromptIds.Length,
        OutputTokenCount = result.Ids.Length,
        TotalTokenCount = result.PromptIds.Length + result.Ids.Length,
    };

    /// <summary>Disposes the model where this client owns it.</summary>
    public void Dispose()
    {
        if (_ownsModel)
        {
            _model.Dispose();
        }
    }
}
