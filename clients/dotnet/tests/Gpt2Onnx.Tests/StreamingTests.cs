// Streaming (GenerationTests has the pieces of real generations, stop strings and cancellation between steps).
// The incremental decoder holds back a character whose UTF-8 bytes span several byte-level tokens until its last
// byte arrives: every fixture continuation is ASCII, so this pushes the non-ASCII expectation prompt's own ids, where
// 東 (E6 9D B1) is ids 30266, 109 and 京 (E4 BA AC) is ids 12859, 105. And a token cancelled before the stream
// starts stops it before the prefill.
using System.Text.Json;
using Xunit;

namespace Gpt2Onnx.Tests;

public class StreamingTests
{
    [Fact]
    public void TheDecoderHoldsBackACharacterUntilItsLastByte()
    {
        using Gpt2Model model = Gpt2Model.Open(Fixtures.Folder("pydocs-micro-fp32"));
        JsonElement prompt = Fixtures.Expectations("pydocs-micro-fp32").GetProperty("prompts").EnumerateArray()
            .Single(p => p.GetProperty("text").GetString()!.Contains('東'));
        string text = prompt.GetProperty("text").GetString()!;
        long[] ids = Fixtures.Longs(prompt.GetProperty("ids"));
        var decoder = new IncrementalDecoder(model.Tokenizer);
        string[] pieces = ids.Select(decoder.Push).ToArray();

        int east = Array.IndexOf(ids, 30266L), capital = Array.IndexOf(ids, 12859L);
        Assert.Equal(109, ids[east + 1]);
        Assert.Equal(105, ids[capital + 1]);
        Assert.Equal("", pieces[east]);        // 東's first two bytes: nothing to release yet
        Assert.Equal("東", pieces[east + 1]);  // its last byte: the whole character
        Assert.Equal("", pieces[capital]);
        Assert.Equal("京", pieces[capital + 1]);
        for (int i = 0; i < pieces.Length; i++)
        {
            if (i != east && i != capital)
            {
                Assert.NotEqual("", pieces[i]);  // every other token completes its characters at once
            }
            Assert.DoesNotContain('\uFFFD', pieces[i]);
            Assert.False(pieces[i].Length > 0 && char.IsHighSurrogate(pieces[i][^1]));
        }
        Assert.Equal("", decoder.Flush());
        Assert.Equal(text, string.Concat(pieces));
    }

    [Fact]
    public async Task ATokenCancelledBeforehandStopsTheStreamBeforeThePrefill()
    {
        // The prompt is beyond the context: a prefill (or any check of it) would throw ArgumentOutOfRangeException,
        // so OperationCanceledException shows the token was checked first.
        using Gpt2Model model = Gpt2Model.Open(Fixtures.Folder("pydocs-micro-fp32"));
        string tooLong = string.Concat(Enumerable.Repeat(" word", 130));
        using var cancel = new CancellationTokenSource();
        await cancel.CancelAsync();
        IAsyncEnumerator<string> stream = model.GenerateStreamAsync(tooLong, null, cancel.Token)
            .GetAsyncEnumerator();
        await Assert.ThrowsAnyAsync<OperationCanceledException>(async () => await stream.MoveNextAsync());
        await stream.DisposeAsync();
        await Assert.ThrowsAsync<ArgumentOutOfRangeException>(async () =>
        {
            await foreach (string piece in model.GenerateStreamAsync(tooLong))
            {
                Assert.Fail($"a piece came: {piece}");
            }
        });
    }
}
