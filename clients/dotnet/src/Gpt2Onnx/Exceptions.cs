// Typed errors of the library: every refusal of an export folder is an ExportFolderException; all derive from
// Gpt2OnnxException. Invalid options and prompts beyond the context stay ArgumentException / ArgumentOutOfRangeException
// (the .NET convention for bad arguments), and ONNX Runtime's own failures stay OnnxRuntimeException.
namespace Gpt2Onnx;

/// <summary>The base of every error this library raises itself.</summary>
public class Gpt2OnnxException(string message) : Exception(message);

/// <summary>An export folder cannot be used: see the subclasses for why.</summary>
public class ExportFolderException(string message) : Gpt2OnnxException(message);

/// <summary>The folder is not a gpt2-onnx export (no manifest.json, another format, a newer schema, malformed).
/// Files that lie in the folder but are not listed are ignored (see FolderCheck.Verify).</summary>
public class NotAnExportException(string message) : ExportFolderException(message);

/// <summary>A file manifest.json lists is not in the folder.</summary>
public sealed class MissingFileException(string file, string message) : ExportFolderException(message)
{
    /// <summary>The file's name as manifest.json lists it (or the folder, where the folder itself is missing).</summary>
    public string File { get; } = file;
}

/// <summary>A file manifest.json lists has another size or sha256 than the manifest records.</summary>
public sealed class ChangedFileException(string file, string message) : ExportFolderException(message)
{
    /// <summary>The file's name as manifest.json lists it.</summary>
    public string File { get; } = file;
}

/// <summary>The execution provider asked for cannot run in this process (CUDA with a CPU-only ONNX Runtime, or
/// CUDA libraries that do not load). Never answered by a silent CPU run.</summary>
public sealed class ProviderUnavailableException(string provider, string message) : Gpt2OnnxException(message)
{
    /// <summary>The provider asked for ("cuda").</summary>
    public string Provider { get; } = provider;
}
