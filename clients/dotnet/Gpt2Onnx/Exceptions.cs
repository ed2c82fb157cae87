// Typed errors of the library: every refusal of an export folder is an ExportFolderException.
namespace Gpt2Onnx;

/// <summary>An export folder cannot be used: see the subclasses for why.</summary>
public class ExportFolderException(string message) : Exception(message);

/// <summary>The folder is not a gpt2-onnx export (no manifest.json, another format, a newer schema, malformed).
/// Files that lie in the folder but are not listed are ignored (see
/// ExportFolder.Verify).</summary>
public class NotAnExportException(string message) : ExportFolderException(message);

/// <summary>A file manifest.json lists is not in the folder.</summary>
public sealed class MissingFileException(string file, string message) : ExportFolderException(message)
{
    public string File { get; } = file;
}

/// <summary>A file manifest.json lists has another size or sha256 than the manifest records.</summary>
public sealed class ChangedFileException(string file, string message) : ExportFolderException(message)
{
    public string File { get; } = file;
}
