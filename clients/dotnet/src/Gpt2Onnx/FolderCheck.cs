// Before the first token: every file manifest.json lists must be there with the recorded size and sha256.
using System.Security.Cryptography;

namespace Gpt2Onnx;

/// <summary>The folder's files against manifest.json's sizes and sha256s.</summary>
public static class FolderCheck
{
    /// <summary>Throws MissingFileException or ChangedFileException for the first listed file that is absent or
    /// differs (size first, then sha256; the weights file is hashed in a streaming pass, never loaded whole).</summary>
    public static void Verify(string folder, Manifest manifest)
    {
        foreach ((string name, FileRecord record) in manifest.Files.OrderBy(f => f.Key, StringComparer.Ordinal))
        {
            string path = Path.Combine(folder, name);
            var info = new FileInfo(path);
            if (!info.Exists)
            {
                throw new MissingFileException(name, $"{path} is missing (manifest.json lists it)");
            }
            if (info.Length != record.Size)
            {
                throw new ChangedFileException(
                    name, $"{path} has {info.Length} bytes; manifest.json records {record.Size}: the folder changed");
            }
            string actual = Sha256Hex(path);
            if (!string.Equals(actual, record.Sha256, StringComparison.OrdinalIgnoreCase))
            {
                throw new ChangedFileException(
                    name, $"{path} has sha256 {actual}; manifest.json records {record.Sha256}: the folder changed");
            }
        }
        foreach (string required in new[] { manifest.Prefill.File, manifest.Decode.File, manifest.WeightsFile,
                     Gpt2Tokenizer.VocabFile, Gpt2Tokenizer.MergesFile })
        {
            if (!manifest.Files.ContainsKey(required))
            {
                throw new NotAnExportException($"{folder}/manifest.json does not list {required}");
            }
        }
    }

    /// <summary>The sha256 of a file, lower-case hex, in one streaming pass.</summary>
    public static string Sha256Hex(string path)
    {
        using FileStream stream = File.OpenRead(path);
        return Convert.ToHexString(SHA256.HashData(stream)).ToLowerInvariant();
    }
}
