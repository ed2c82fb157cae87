// The IChatClient: messages become the prompt as documented, ChatOptions map onto the generation options, usage
// counts tokens, and streaming adds up to the same reply.
using Microsoft.Extensions.AI;
using Xunit;

namespace Gpt2Onnx.Tests;

public class ChatClientTests
{
    private static readonly ChatMessage[] Messages =
    [
        new(ChatRole.System, "The return value"),
        new(ChatRole.User, "of the function is"),
    ];

    [Fact]
    public void MessagesBecomeTheirTextsJoinedByLineBreaks()
    {
        Assert.Equal("The return value\nof the function is", Gpt2ChatClient.FormatPrompt(Messages));
    }

    [Fact]
    public async Task AResponseIsTheModelsContinuationWithUsage()
    {
        using Gpt2Model model = Gpt2Model.Open(Fixtures.Folder("pydocs-micro-fp32"));
        using IChatClient client = new Gpt2ChatClient(model);
        ChatResponse response = await client.GetResponseAsync(Messages, new ChatOptions { MaxOutputTokens = 6 });
        GenerationResult expected = model.Generate(Gpt2ChatClient.FormatPrompt(Messages),
            new GenerationOptions { MaxNewTokens = 6 });
        Assert.Equal(expected.Text, response.Text);
        Assert.Equal(ChatFinishReason.Length, response.FinishReason);
        Assert.Equal(expected.PromptIds.Length, response.Usage!.InputTokenCount);
        Assert.Equal(6, response.Usage.OutputTokenCount);
        Assert.Equal(expected.PromptIds.Length + 6, response.Usage.TotalTokenCount);
        Assert.Equal("gpt2-onnx", client.GetService<ChatClientMetadata>()!.ProviderName);
    }

    [Fact]
    public async Task StreamingAddsUpToTheResponse()
    {
        using Gpt2Model model = Gpt2Model.Open(Fixtures.Folder("pydocs-micro-fp32"));
        using IChatClient client = new Gpt2ChatClient(model);
        var options = new ChatOptions { MaxOutputTokens = 10, Temperature = 1.2f, TopK = 40, Seed = 7 };
        ChatResponse whole = await client.GetResponseAsync(Messages, options);
        var updates = new List<ChatResponseUpdate>();
        await foreach (ChatResponseUpdate update in client.GetStreamingResponseAsync(Messages, options))
        {
            updates.Add(update);
        }
        Assert.Equal(whole.Text, string.Concat(updates.Select(u => u.Text)));
        ChatResponse combined = updates.ToChatResponse();
        Assert.Equal(whole.Usage!.OutputTokenCount, combined.Usage!.OutputTokenCount);
        Assert.Equal(whole.FinishReason, combined.FinishReason);
    }

    [Fact]
    public void ChatOptionsMapOntoTheGenerationOptions()
    {
        using Gpt2Model model = Gpt2Model.Open(Fixtures.Folder("pydocs-micro-fp32"));
        var client = new Gpt2ChatClient(model);
        GenerationOptions sampled = client.ToGenerationOptions(new ChatOptions
        {
            MaxOutputTokens = 9, Temperature = 0.5f, TopP = 0.9f, TopK = 20, Seed = 3, StopSequences = ["\n\n"],
            FrequencyPenalty = 0.25f, PresencePenalty = 0.5f,
        });
        Assert.True(sampled.DoSample);
        Assert.Equal((9, 0.5, 0.9, 20, 3L), (sampled.MaxNewTokens, sampled.Temperature, sampled.TopP,
            sampled.TopK, sampled.Seed!.Value));  // 0.9f as written, not widened to 0.899999976158142
        Assert.Equal(["\n\n"], sampled.Stop);
        Assert.Equal((0.25, 0.5), (sampled.FrequencyPenalty, sampled.PresencePenalty));
        GenerationOptions greedy = client.ToGenerationOptions(new ChatOptions { Temperature = 0, TopP = 0.5f });
        Assert.False(greedy.DoSample);
        Assert.Equal(1.0, greedy.TopP);
        Assert.Throws<NotSupportedException>(() => client.ToGenerationOptions(
            new ChatOptions { ResponseFormat = ChatResponseFormat.Json }));
    }

    [Fact]
    public async Task AStopSequenceEndsTheReply()
    {
        using Gpt2Model model = Gpt2Model.Open(Fixtures.Folder("pydocs-micro-fp32"));
        using IChatClient client = new Gpt2ChatClient(model);
        ChatResponse response = await client.GetResponseAsync("The return value of the function is",
            new ChatOptions { MaxOutputTokens = 16, StopSequences = ["\n"] });
        Assert.Equal(" the", response.Text);
        Assert.Equal(ChatFinishReason.Stop, response.FinishReason);
    }
}
