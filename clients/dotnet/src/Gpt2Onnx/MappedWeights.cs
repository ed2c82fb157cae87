// Weights in memory once: the export's weights file mapped read-only, and each of its tensors (as manifest.json's
// weights_index states them) handed to both sessions as an initializer that points into the map, with prepacking
// off. Left to itself, ONNX Runtime maps the file per session and prepacks each MatMul weight into a private copy
// per session (GPT-2-small fp32: about 2.7 × the weights' bytes with both sessions loaded, measured with the C++
// sample). The C++ twin is clients/cpp/src/mapped_weights.cpp; runtimes/shared_weights.py has the measurements
// and the speed it trades.
// Float32 exports only: quantized graphs need prepacking (MatMulNBits is many times slower without it).
using System.IO.MemoryMappedFiles;
using Microsoft.ML.OnnxRuntime;
using Microsoft.ML.OnnxRuntime.Tensors;

namespace Gpt2Onnx;

/// <summary>Where one tensor lies in the weights file (manifest.json's weights_index).</summary>
public sealed record WeightEntry(string Name, string Dtype, long[] Shape, long Offset, long Length)
{
    /// <summary>Bytes per element of a weights_index dtype; 0 for one this sample does not know.</summary>
    public static int DtypeSize(string dtype) => dtype switch
    {
        "float32" or "int32" => 4,
        "float16" => 2,
        "uint8" or "int8" => 1,
        "int64" => 8,
        _ => 0,
    };

    /// <summary>Refuses an index with an unknown dtype, a length that does not fit the shape, a name given twice,
    /// overlapping tensors, or a tensor beyond <paramref name="fileSize"/>. Expects file order.</summary>
    public static void CheckIndex(IReadOnlyList<WeightEntry> index, long fileSize)
    {
        var names = new HashSet<string>();
        long endOfPrevious = 0;
        foreach (WeightEntry e in index)
        {
            string tensor = $"weights_index: tensor '{e.Name}'";
            int element = DtypeSize(e.Dtype);
            if (element == 0)
            {
                throw new ExportFolderException($"{tensor} has dtype '{e.Dtype}', which this sample cannot map");
            }
            long elements;
            try
            {
                elements = checked(e.Shape.Aggregate(1L, (n, d) => d < 0
                    ? throw new ExportFolderException($"{tensor} has a negative dimension")
                    : checked(n * d)) * element);
            }
            catch (OverflowException)
            {
                throw new ExportFolderException($"{tensor} has more elements than can be counted");
            }
            if (elements != e.Length)
            {
                throw new ExportFolderException($"{tensor} does not fill its {e.Length} bytes");
            }
            if (e.Offset < 0 || e.Offset > fileSize || e.Length > fileSize - e.Offset)
            {
                throw new ExportFolderException($"{tensor} lies beyond the end of the weights file");
            }
            if (e.Offset < endOfPrevious)
            {
                throw new ExportFolderException(
                    $"{tensor} overlaps the tensor before it (or the index is not in file order)");
            }
            if (!names.Add(e.Name))
            {
                throw new ExportFolderException($"{tensor} is listed twice");
            }
            endOfPrevious = e.Offset + e.Length;
        }
    }
}

/// <summary>The weights file mapped once; its tensors as OrtValues over the map (no copy). Must outlive the
/// sessions it is added to.</summary>
public sealed class MappedWeights : IDisposable
{
    private readonly MemoryMappedFile _file;
    private readonly MemoryMappedViewAccessor? _view;
    private readonly List<(string Name, OrtValue Value)> _tensors = [];

    /// <summary>Maps <paramref name="path"/> and makes a view of each tensor <paramref name="index"/> lists.</summary>
    public MappedWeights(string path, IReadOnlyList<WeightEntry> index)
    {
        MappedBytes = new FileInfo(path).Length;
        WeightEntry.CheckIndex(index, MappedBytes);  // against the file as it is, not only the manifest's size
        _file = MemoryMappedFile.CreateFromFile(path, FileMode.Open, null, 0, MemoryMappedFileAccess.Read);
        try
        {
            _view = _file.CreateViewAccessor(0, 0, MemoryMappedFileAccess.Read);
            nint start = _view.SafeMemoryMappedViewHandle.DangerousGetHandle() + (nint)_view.PointerOffset;
            foreach (WeightEntry e in index)
            {
                // ONNX Runtime only reads initializers; the read-only pages are never written.
                OrtValue value = OrtValue.CreateTensorValueWithData(
                    OrtMemoryInfo.DefaultInstance, ElementType(e.Dtype), e.Shape, start + (nint)e.Offset, e.Length);
                _tensors.Add((e.Name, value));
            }
        }
        catch
        {
            Dispose();
            throw;
        }
    }

    /// <summary>Tensors handed to the sessions.</summary>
    public int TensorCount => _tensors.Count;
    /// <summary>The weights file's size.</summary>
    public long MappedBytes { get; }

    /// <summary>Every tensor as an initializer of the sessions created with <paramref name="options"/>, and
    /// prepacking off (a packed copy per session is what sharing avoids).</summary>
    public void AddTo(SessionOptions options)
    {
        foreach (var (name, value) in _tensors)
        {
            options.AddInitializer(name, value);
        }
        options.AddSessionConfigEntry("session.disable_prepacking", "1");
    }

    private static TensorElementType ElementType(string dtype) => dtype switch
    {
        "float32" => TensorElementType.Float,
        "float16" => TensorElementType.Float16,
        "uint8" => TensorElementType.UInt8,
        "int8" => TensorElementType.Int8,
        "int32" => TensorElementType.Int32,
        "int64" => TensorElementType.Int64,
        _ => throw new ExportFolderException($"weights_index: dtype '{dtype}' cannot be mapped"),
    };

    /// <summary>Releases the views, then the map.</summary>
    public void Dispose()
    {
        foreach (var (_, value) in _tensors)
        {
            value.Dispose();  // the views go before the memory they point into
        }
        _tensors.Clear();
        _view?.Dispose();
        _file.Dispose();
    }
}
