// Prefill and decode steps with the KV cache in ONNX Runtime's memory, through IO binding, allocation-free per step.
//
//   buffers   two native buffers per KV tensor (present.{i}.key|value), each (rows, n_head, capacity, head_dim),
//             on the provider's device (ONNX Runtime's allocator: host memory, or CUDA memory)
//   step      past of length p is read from buffer[p % 2], the present of length p + 1 is written to
//             buffer[(p + 1) % 2]: both compact (rows, n_head, length, head_dim) tensors at the buffer's start
//   views     the OrtValues over those buffers (one per tensor and length) and over the pinned attention-mask array
//             (one per length) are made once, before the first step, so a step creates no managed object: it binds
//             views, writes the new tokens into pinned arrays, runs, and reads the logits from a pinned array that
//             ONNX Runtime wrote into directly
using System.Runtime.InteropServices;
using Microsoft.ML.OnnxRuntime;
using Microsoft.ML.OnnxRuntime.Tensors;

namespace Gpt2Onnx;

/// <summary>One batch of sequences: Prefill once, then Step per new token. Not shared between threads (each
/// generation makes its own; the sessions underneath are shared).</summary>
public sealed class KvRunner : IDisposable
{
    private readonly ExportSessions _sessions;
    private readonly int _capacity;
    private readonly int _heads, _headDim, _elementSize, _vocab;
    private int _rows;
    private KvBuffers? _buffers;
    private OrtValue[] _maskViews = [];          // index: length - first; (rows, length) over _mask
    private long[] _mask = [];                   // pinned, (rows, length) row-major for the current length
    private long[] _tokens = [], _positions = [];  // pinned, (rows, 1) each
    private float[] _logits = [];                // pinned, (rows, V): what the last run produced
    private OrtValue? _tokensValue, _positionsValue, _logitsValue;
    private OrtIoBinding[] _bindings = [];       // index: past length - first; the views of that step bound
    private int _first;                          // the prompt's length: the shortest past a view exists for

    /// <summary>A runner over <paramref name="sessions"/> whose cache holds up to <paramref name="capacity"/>
    /// tokens per row (0: the model's n_positions).</summary>
    public KvRunner(ExportSessions sessions, int capacity = 0)
    {
        _sessions = sessions;
        Manifest m = sessions.Manifest;
        _capacity = capacity > 0 ? Math.Min(capacity, m.NPositions) : m.NPositions;
        _heads = m.NHead;
        _headDim = m.NEmbd / m.NHead;
        _elementSize = sessions.KvElementType == TensorElementType.Float16 ? 2 : 4;
        _vocab = m.VocabSize;
    }

    /// <summary>Tokens each row's cache holds (padding included).</summary>
    public int PastLength { get; private set; }

    /// <summary>Rows in the batch the decode steps run.</summary>
    public int Rows => _rows;

    /// <summary>The last run's next-token logits, (Rows, V), valid until the next Step.</summary>
    public ReadOnlySpan<float> Logits => _logits;

    /// <summary>The pinned array behind <see cref="Logits"/>; processors write into it in place.</summary>
    internal float[] LogitsArray => _logits;

    /// <summary>input_ids and attention_mask (B, T), left-padded → the last position's logits (B, V) (a copy).</summary>
    public float[] Prefill(long[] ids, long[] mask, int batch)
    {
        Start(ids, mask, batch, batch);
        return _logits.ToArray();
    }

    /// <summary>One new token per row (B) and the mask over past and new tokens (B, P + 1) → logits (B, V) (a
    /// copy). The allocation-free form is <see cref="Advance"/>.</summary>
    public float[] Step(long[] tokens, long[] mask)
    {
        if (_buffers is null || tokens.Length != _rows || mask.Length != _rows * (PastLength + 1))
        {
            throw new InvalidOperationException("Step needs a Prefill first and a mask covering past + 1 tokens");
        }
        tokens.CopyTo(_tokens, 0);
        mask.CopyTo(_mask, 0);
        Batching.PositionIds(mask, _rows, 1).CopyTo(_positions, 0);
        Run();
        return _logits.ToArray();
    }

    /// <summary>Prefill <paramref name="promptRows"/> left-padded prompts (T columns), then make room for
    /// <paramref name="rows"/> decode rows: each prompt's cache copied into rows / promptRows consecutive rows (beam
    /// search). Logits land in <see cref="Logits"/>, one row per decode row.</summary>
    internal void Start(long[] ids, long[] mask, int promptRows, int rows)
    {
        if (_buffers is not null)
        {
            throw new InvalidOperationException("a KvRunner prefills once");
        }
        if (promptRows < 1 || ids.Length == 0 || ids.Length % promptRows != 0 || mask.Length != ids.Length)
        {
            throw new ArgumentException($"{promptRows} prompt rows need ids and a mask of (rows, T), T >= 1",
                nameof(ids));
        }
        int width = ids.Length / promptRows;
        if (width > _capacity)  // a prompt may fill the cache: prefill alone (FirstStepLogits) needs no room after it
        {
            throw new ArgumentOutOfRangeException(nameof(ids), $"{width} tokens exceed the cache's {_capacity} positions");
        }
        _rows = rows;
        _first = width;
        Allocate(Math.Max(width, 1));
        RunPrefill(ids, mask, promptRows, width);
        PastLength = width;
        mask.AsSpan().CopyTo(_mask);
        long[] positions = Batching.PositionIds(mask, promptRows, 1);  // (P, 1): the last real position
        for (int row = 0; row < promptRows; row++)
        {
            _positions[row] = positions[row];  // advanced by one before each step
        }
        if (rows != promptRows)
        {
            ExpandRows(promptRows, rows / promptRows, width);
        }
    }

    /// <summary>Feeds one new token per row (all real: the mask grows by a column of ones) and runs decode; the
    /// logits land in <see cref="Logits"/>. Allocates nothing.</summary>
    internal void Advance(ReadOnlySpan<long> tokens)
    {
        if (PastLength + 1 > _capacity)
        {
            throw new InvalidOperationException($"the cache holds {_capacity} tokens; no room for another");
        }
        tokens.CopyTo(_tokens);
        int length = PastLength;
        for (int row = _rows - 1; row >= 0; row--)  // (rows, length) → (rows, length + 1), back to front
        {
            _mask.AsSpan(row * length, length).CopyTo(_mask.AsSpan(row * (length + 1)));
            _mask[row * (length + 1) + length] = 1;
            _positions[row] += 1;
        }
        Run();
    }

    /// <summary>Row r of the batch becomes what row <paramref name="sources"/>[r] was (beam search's parents); the
    /// cache rows move on the CPU. Allocates scratch the first time only.</summary>
    internal void Reorder(ReadOnlySpan<int> sources)
    {
        if (_buffers is null)
        {
            throw new InvalidOperationException("Reorder needs a Prefill first");
        }
        _buffers.Reorder(sources, PastLength);
        PermuteRows(_mask, sources, PastLength);
        PermuteRows(_positions, sources, 1);
    }

    private void Allocate(int first)
    {
        int rows = _rows;
        _buffers = new KvBuffers(_sessions, rows, _heads, _headDim, _capacity, _elementSize, first);
        _mask = GC.AllocateArray<long>(rows * _capacity, pinned: true);
        _tokens = GC.AllocateArray<long>(rows, pinned: true);
        _positions = GC.AllocateArray<long>(rows, pinned: true);
        _logits = GC.AllocateArray<float>(rows * _vocab, pinned: true);
        _tokensValue = PinnedView(_tokens, TensorElementType.Int64, [rows, 1], sizeof(long));
        _positionsValue = PinnedView(_positions, TensorElementType.Int64, [rows, 1], sizeof(long));
        _logitsValue = PinnedView(_logits, TensorElementType.Float, [rows, 1, _vocab], sizeof(float));
        _first = first;
        _maskViews = new OrtValue[_capacity - first];
        for (int length = first + 1; length <= _capacity; length++)  // decode's mask covers past + 1 tokens
        {
            _maskViews[length - first - 1] = PinnedView(_mask, TensorElementType.Int64, [rows, length], sizeof(long));
        }
        // One binding per past length, made now: a step only runs the binding of its length.
        _bindings = new OrtIoBinding[_capacity - first];
        for (int past = first; past < _capacity; past++)
        {
            _bindings[past - first] = Bind(past);
        }
    }

    private OrtIoBinding Bind(int past)
    {
        OrtIoBinding binding = _sessions.Decode.CreateIoBinding();
        binding.BindInput(ExportSessions.InputIds, _tokensValue!);
        binding.BindInput(ExportSessions.PositionIds, _positionsValue!);
        binding.BindInput(ExportSessions.AttentionMask, _maskViews[past - _first]);
        binding.BindOutput(ExportSessions.Logits, _logitsValue!);
        OrtValue[] pastViews = _buffers!.ViewsOf(past), presentViews = _buffers.ViewsOf(past + 1);
        for (int i = 0; i < pastViews.Length; i++)
        {
            binding.BindInput(_sessions.PastNames[i], pastViews[i]);
            binding.BindOutput(_sessions.PresentNames[i], presentViews[i]);
        }
        return binding;
    }

    private static OrtValue PinnedView<T>(T[] pinned, TensorElementType type, long[] shape, int size) where T : unmanaged
    {
        long count = shape.Aggregate(1L, (a, b) => a * b);
        nint address = Marshal.UnsafeAddrOfPinnedArrayElement(pinned, 0);
        return OrtValue.CreateTensorValueWithData(OrtMemoryInfo.DefaultInstance, type, shape, address, count * size);
    }

    private void RunPrefill(long[] ids, long[] mask, int promptRows, int width)
    {
        long[] positions = Batching.PositionIds(mask, promptRows, width);  // (P, T)
        using OrtValue idsValue = OrtValue.CreateTensorValueFromMemory(ids, [promptRows, width]);
        using OrtValue maskValue = OrtValue.CreateTensorValueFromMemory(mask, [promptRows, width]);
        using OrtValue positionValue = OrtValue.CreateTensorValueFromMemory(positions, [promptRows, width]);
        using OrtIoBinding binding = _sessions.Prefill.CreateIoBinding();
        binding.BindInput(ExportSessions.InputIds, idsValue);
        binding.BindInput(ExportSessions.AttentionMask, maskValue);
        binding.BindInput(ExportSessions.PositionIds, positionValue);
        binding.BindOutputToDevice(ExportSessions.Logits, OrtMemoryInfo.DefaultInstance);
        OrtValue[] presents = _buffers!.Views(promptRows, width);  // (P, H, T, D) at the buffers' start
        try
        {
            for (int i = 0; i < presents.Length; i++)
            {
                binding.BindOutput(_sessions.PresentNames[i], presents[i]);
            }
            using (var runOptions = new RunOptions())
            {
                _sessions.Prefill.RunWithBinding(runOptions, binding);
            }
            using IDisposableReadOnlyCollection<OrtValue> outputs = binding.GetOutputValues();
            OrtValue logits = outputs[0];
            long[] shape = logits.GetTensorTypeAndShape().Shape;  // (P, S, V): S = 1 (last position only) or T
            int last = (int)shape[1] - 1;
            ReadOnlySpan<float> data = logits.GetTensorDataAsSpan<float>();
            for (int row = 0; row < promptRows; row++)
            {
                data.Slice((row * (int)shape[1] + last) * _vocab, _vocab).CopyTo(_logits.AsSpan(row * _vocab));
            }
        }
        finally
        {
            foreach (OrtValue view in presents)
            {
                view.Dispose();
            }
        }
    }

    private void ExpandRows(int promptRows, int copies, int width)
    {
        _buffers!.Expand(promptRows, copies, width);
        for (int row = _rows - 1; row >= 0; row--)  // back to front: a source row is never overwritten before use
        {
            int source = row / copies;
            _mask.AsSpan(source * width, width).CopyTo(_mask.AsSpan(row * width));
            _positions[row] = _positions[source];
            _logits.AsSpan(source * _vocab, _vocab).CopyTo(_logits.AsSpan(row * _vocab));
        }
    }

    private void PermuteRows(long[] data, ReadOnlySpan<int> sources, int width)
    {
        long[] old = data.AsSpan(0, _rows * width).ToArray();  // beam search only: not on the greedy path
        for (int row = 0; row < _rows; row++)
        {
            old.AsSpan(sources[row] * width, width).CopyTo(data.AsSpan(row * width));
        }
    }

    private void Run()
    {
        int past = PastLength;
        _sessions.Decode.RunWithBinding(_sessions.RunOptions, _bindings[past - _first]);
        PastLength = past + 1;
    }

    /// <summary>Releases the views, the binding and the cache's buffers.</summary>
    public void Dispose()
    {
        foreach (OrtIoBinding binding in _bindings)
        {
            binding.Dispose();
        }
        _bindings = [];
        foreach (OrtValue view in _maskViews)
        {
            view.Dispose();
        }
        _tokensValue?.Dispose();
        _positionsValue?.Dispose();
        _logitsValue?.Dispose();
        _buffers?.Dispose();
        _buffers = null;
    }
}
