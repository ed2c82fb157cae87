// The KV cache's memory: two buffers per KV tensor (ping-pong between past and present) and the OrtValue views over
// them, one per tensor and cache length, made before the first decode step (see KvRunner).
using System.Runtime.InteropServices;
using Microsoft.ML.OnnxRuntime;

namespace Gpt2Onnx;

internal sealed class KvBuffers : IDisposable
{
    private readonly ExportSessions _sessions;
    private readonly int _rows, _heads, _headDim, _capacity, _elementSize, _first;
    private readonly OrtAllocator _allocator;
    private readonly bool _ownsAllocator;
    private readonly OrtMemoryAllocation[][] _memory;  // [parity][tensor]: (rows, heads, capacity, headDim) each
    private readonly OrtValue[][] _views;              // [length - first][tensor]: (rows, heads, length, headDim)
    private byte[]? _scratch;                          // beam search's reorder, made on first use

    public KvBuffers(ExportSessions sessions, int rows, int heads, int headDim, int capacity, int elementSize,
        int first)
    {
        _sessions = sessions;
        (_rows, _heads, _headDim, _capacity, _elementSize, _first) = (rows, heads, headDim, capacity, elementSize, first);
        _ownsAllocator = sessions.Provider != "cpu";
        _allocator = _ownsAllocator ? new OrtAllocator(sessions.Decode, sessions.KvMemory) : OrtAllocator.DefaultInstance;
        int tensors = sessions.PresentNames.Count;
        ulong bytes = checked((ulong)rows * (ulong)heads * (ulong)capacity * (ulong)headDim * (ulong)elementSize);
        if (bytes > uint.MaxValue)
        {
            throw new ArgumentOutOfRangeException(nameof(capacity), $"a KV buffer of {bytes} bytes is too large");
        }
        _memory = new OrtMemoryAllocation[2][];
        _views = new OrtValue[capacity - first + 1][];
        try
        {
            for (int parity = 0; parity < 2; parity++)
            {
                _memory[parity] = new OrtMemoryAllocation[tensors];
                for (int i = 0; i < tensors; i++)
                {
                    _memory[parity][i] = _allocator.Allocate((uint)bytes);
                }
            }
            for (int length = first; length <= capacity; length++)
            {
                _views[length - first] = Views(rows, length);
            }
        }
        catch
        {
            Dispose();
            throw;
        }
    }

    /// <summary>The views of every tensor at <paramref name="length"/> (made in the constructor; not to be disposed).</summary>
    public OrtValue[] ViewsOf(int length) => _views[length - _first];

    /// <summary>New views of every tensor as (rows, heads, length, headDim) at the start of buffer[length % 2]; the
    /// caller disposes them.</summary>
    public OrtValue[] Views(int rows, int length)
    {
        var views = new OrtValue[_memory[0].Length];
        long[] shape = [rows, _heads, length, _headDim];
        long bytes = (long)rows * _heads * length * _headDim * _elementSize;
        for (int i = 0; i < views.Length; i++)
        {
            views[i] = OrtValue.CreateTensorValueWithData(_sessions.KvMemory, _sessions.KvElementType, shape,
                _memory[length % 2][i].DangerousGetHandle(), bytes);
        }
        return views;
    }

    /// <summary>Each of the first <paramref name="promptRows"/> rows (compact at <paramref name="length"/>) copied
    /// into <paramref name="copies"/> consecutive rows.</summary>
    public void Expand(int promptRows, int copies, int length)
    {
        RequireHost("beam search");
        int rowBytes = _heads * length * _headDim * _elementSize;
        foreach (OrtMemoryAllocation tensor in _memory[length % 2])
        {
            Span<byte> data = Bytes(tensor, _rows * rowBytes);
            for (int row = promptRows * copies - 1; row >= 0; row--)
            {
                data.Slice(row / copies * rowBytes, rowBytes).CopyTo(data.Slice(row * rowBytes));
            }
        }
    }

    /// <summary>Row r becomes row sources[r], in every tensor of the cache at <paramref name="length"/>.</summary>
    public void Reorder(ReadOnlySpan<int> sources, int length)
    {
        RequireHost("beam search");
        int rowBytes = _heads * length * _headDim * _elementSize;
        _scratch ??= new byte[(long)_rows * _heads * _capacity * _headDim * _elementSize];
        foreach (OrtMemoryAllocation tensor in _memory[length % 2])
        {
            Span<byte> data = Bytes(tensor, _rows * rowBytes);
            data.CopyTo(_scratch);
            for (int row = 0; row < _rows; row++)
            {
                _scratch.AsSpan(sources[row] * rowBytes, rowBytes).CopyTo(data.Slice(row * rowBytes));
            }
        }
    }

    private void RequireHost(string what)
    {
        if (_sessions.Provider != "cpu")
        {
            throw new NotSupportedException($"{what} moves cache rows on the host: provider '{_sessions.Provider}' "
                + "keeps them on the device; use the CPU provider");
        }
    }

    private static unsafe Span<byte> Bytes(OrtMemoryAllocation memory, int length) =>
        new((void*)memory.DangerousGetHandle(), length);

    public void Dispose()
    {
        foreach (OrtValue[]? views in _views)
        {
            foreach (OrtValue view in views ?? [])
            {
                view.Dispose();
            }
        }
        foreach (OrtMemoryAllocation[]? parity in _memory)
        {
            foreach (OrtMemoryAllocation? memory in parity ?? [])
            {
                memory?.Dispose();
            }
        }
        if (_ownsAllocator)
        {
            _allocator.Dispose();
        }
    }
}
