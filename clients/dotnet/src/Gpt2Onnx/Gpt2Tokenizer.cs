// GPT-2's byte-level BPE over the export folder's OWN vocab.json + merges.txt (Microsoft.ML.Tokenizers'
// BpeTokenizer), not a tokenizer built into a package: a checkpoint with its own files gets its own ids.
using System.Text.RegularExpressions;
using Microsoft.ML.Tokenizers;

namespace Gpt2Onnx;

/// <summary>GPT-2's byte-level BPE over an export folder's vocab.json and merges.txt.</summary>
public sealed class Gpt2Tokenizer
{
    /// <summary>The files read, and the end-of-text token's text.</summary>
    public const string VocabFile = "vocab.json", MergesFile = "merges.txt", EndOfText = "<|endoftext|>";

    // GPT-2's pre-tokenization pattern (the one in OpenAI's encoder.py and Hugging Face's ByteLevel pre-tokenizer).
    private const string Gpt2Pattern =
        @"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

    private readonly Tokenizer _tokenizer;

    /// <summary>Reads the tokenizer of <paramref name="folder"/>; throws NotAnExportException where it does not load.</summary>
    public Gpt2Tokenizer(string folder, int endOfTextId)
    {
        var special = new Dictionary<string, int> { [EndOfText] = endOfTextId };
        try
        {
            // vocab.json read with JsonDocument (no reflection: the library runs under Native AOT), merges.txt's
            // lines without its "#version" header.
            var options = new BpeOptions(ReadVocabulary(Path.Combine(folder, VocabFile)))
            {
                Merges = File.ReadLines(Path.Combine(folder, MergesFile))
                    .Where(line => line.Length > 0 && !line.StartsWith("#version", StringComparison.Ordinal)).ToList(),
                ByteLevel = true,  // UTF-8 bytes mapped to GPT-2's printable alphabet (space → 'Ġ')
                PreTokenizer = new RegexPreTokenizer(new Regex(Gpt2Pattern, RegexOptions.Compiled), special),
                SpecialTokens = special,
            };
            _tokenizer = BpeTokenizer.Create(options);
        }
        catch (Exception e) when (e is InvalidOperationException or ArgumentException or System.Text.Json.JsonException
            or IOException)
        {
            throw new NotAnExportException($"{folder}: vocab.json/merges.txt are not a BPE tokenizer: {e.Message}");
        }
        EndOfTextId = endOfTextId;
    }

    private static List<KeyValuePair<string, int>> ReadVocabulary(string path)
    {
        using var doc = System.Text.Json.JsonDocument.Parse(File.ReadAllBytes(path));
        return doc.RootElement.EnumerateObject().Select(p => KeyValuePair.Create(p.Name, p.Value.GetInt32())).ToList();
    }

    /// <summary>The end-of-text token's id.</summary>
    public int EndOfTextId { get; }

    /// <summary>Text → ids; "&lt;|endoftext|&gt;" in the text becomes its id.</summary>
    public long[] Encode(string text) => _tokenizer.EncodeToIds(text).Select(id => (long)id).ToArray();

    /// <summary>Ids → text (byte-level: a multi-byte character split across ids decodes once all its bytes are in).
    /// The end-of-text token is left out, as the Python runtime's decode leaves special tokens out.</summary>
    public string Decode(IEnumerable<long> ids) =>
        _tokenizer.Decode(ids.Where(id => id != EndOfTextId).Select(id => checked((int)id))) ?? "";
}
