// Prefill and decode steps with ONNX Runtime IO binding: the KV cache never leaves ONNX Runtime's memory.
//
// Each step binds the previous step's present.* OrtValues as past_key_values.* directly (on CUDA they stay in GPU
// memory; on the CPU no copy is made). Only the small token inputs go in from managed arrays and only the logits
// come back to them.
using Microsoft.ML.OnnxRuntime;

namespace Gpt2Onnx;

/// <summary>The two sessions of one export folder and the names that join them; shared by every KvRunner.</summary>
public sealed class ExportSessions : IDisposable
{
    // The contract's token inputs and logits output (gpt2_onnx/names.py); KV names come from the manifest.
    internal const string InputIds = "input_ids", AttentionMask = "attention_mask", PositionIds = "position_ids";
    internal const string Logits = "logits";

    private readonly bool _ownsKvMemory;

    /// <param name="folder">The export folder.</param>
    /// <param name="manifest">Its manifest.json, read.</param>
    /// <param name="provider">"cpu" or "cuda".</param>
    /// <param name="deviceId">The CUDA device (ignored on the CPU).</param>
    /// <param name="shareWeights">Float32 on the CPU: both sessions read one map of the weights file, prepacking
    /// off (weights in memory once). False, or where that does not apply: ONNX Runtime loads and prepacks the
    /// weights per session.</param>
    public ExportSessions(string folder, Manifest manifest, string provider, int deviceId, bool shareWeights = true)
    {
        Manifest = manifest;
        using var options = new SessionOptions();
        if (provider == "cuda")
        {
            // Needs the Microsoft.ML.OnnxRuntime.Gpu package; throws (no silent CPU fallback) where CUDA cannot load.
            options.AppendExecutionProvider_CUDA(deviceId);
        }
        else if (provider != "cpu")
        {
            throw new ArgumentException($"unknown provider '{provider}'; choose cpu or cuda");
        }
        // The prefill and decode sessions share the cores: each one's threads spin between a run's operators and stop
        // as soon as the run returns, instead of spinning on into the other session's next run (docs/generation.md,
        // "Two sessions never spin against each other"; the same rule as the C++ sample).
        options.AddSessionConfigEntry("session.force_spinning_stop", "1");
        // Both graphs read the one external weights file beside them (model.onnx.data), unless the sessions take its
        // tensors from one map of it (the same rule as runtimes/session.py and the C++ sample).
        if (shareWeights && provider == "cpu" && manifest.Precision == "float32" && manifest.WeightsIndex.Count > 0)
        {
            SharedWeights = new MappedWeights(Path.Combine(folder, manifest.WeightsFile), manifest.WeightsIndex);
            SharedWeights.AddTo(options);
        }
        Prefill = new InferenceSession(Path.Combine(folder, manifest.Prefill.File), options);
        Decode = new InferenceSession(Path.Combine(folder, manifest.Decode.File), options);
        CheckNames(Prefill, manifest.Prefill);
        CheckNames(Decode, manifest.Decode);

        PastNames = manifest.Decode.Inputs.Where(n => n is not (InputIds or AttentionMask or PositionIds)).ToArray();
        PresentNames = manifest.Decode.Outputs.Where(n => n != Logits).ToArray();
        int expected = 2 * manifest.NLayer;  // a key and a value per layer
        if (PastNames.Count != expected || PresentNames.Count != expected
            || !manifest.Prefill.Outputs.Where(n => n != Logits).SequenceEqual(PresentNames))
        {
            throw new ExportFolderException(
                $"manifest.json: the KV inputs and outputs do not pair up over {manifest.NLayer} layers");
        }
        _ownsKvMemory = provider == "cuda";
        KvMemory = _ownsKvMemory
            ? new OrtMemoryInfo(OrtMemoryInfo.allocatorCUDA, OrtAllocatorType.DeviceAllocator, deviceId,
                OrtMemType.Default)
            : OrtMemoryInfo.DefaultInstance;
    }

    public Manifest Manifest { get; }
    public MappedWeights? SharedWeights { get; }           // null: ONNX Runtime loaded the weights per session
    public InferenceSession Prefill { get; }
    public InferenceSession Decode { get; }
    public OrtMemoryInfo KvMemory { get; }                 // where present.* live: host or CUDA device
    public IReadOnlyList<string> PastNames { get; }        // decode's KV inputs, (layer, key/value) order
    public IReadOnlyList<string> PresentNames { get; }     // both graphs' KV outputs, the same order

    private static void CheckNames(InferenceSession session, GraphSpec spec)
    {
        string? missing = spec.Inputs.Where(n => !session.InputMetadata.ContainsKey(n))
            .Concat(spec.Outputs.Where(n => !session.OutputMetadata.ContainsKey(n)))
            .FirstOrDefault();
        if (missing is not null)
        {
            throw new ExportFolderException($"{spec.File} has no tensor '{missing}' although manifest.json lists it");
        }
    }

    public void Dispose()
    {
        Prefill.Dispose();
        Decode.Dispose();
        SharedWeights?.Dispose();  // after the sessions, whose initializers point into it
        if (_ownsKvMemory)
        {
            KvMemory.Dispose();  // DefaultInstance is a process-wide singleton: never disposed here
        }
    }
}

/// <summary>One batch of sequences: Prefill once, then Step per new token. Not shared between threads.</summary>
public sealed class KvRunner(ExportSessions sessions) : IDisposable
{
    private OrtValue[] _past = [];  // (B, n_head, P, head_dim) each, on the provider's device

    public int PastLength { get; private set; }

    /// <summary>input_ids and attention_mask (B, T), left-padded → the last position's logits (B, V).</summary>
    public float[] Prefill(long[] ids, long[] mask, int batch)
    {
        long[] positions = Batching.PositionIds(mask, batch, ids.Length / batch);  // (B, T)
        float[] logits = Run(sessions.Prefill, ids, mask, positions, batch, withPast: false);
        PastLength = ids.Length / batch;
        return logits;
    }

    /// <summary>One new token per row (B) and the mask over past and new tokens (B, P + 1) → logits (B, V).</summary>
    public float[] Step(long[] tokens, long[] mask)
    {
        int batch = tokens.Length;
        if (_past.Length == 0 || mask.Length != batch * (PastLength + 1))
        {
            throw new InvalidOperationException("Step needs a Prefill first and a mask covering past + 1 tokens");
        }
        long[] positions = Batching.PositionIds(mask, batch, 1);  // (B, 1)
        float[] logits = Run(sessions.Decode, tokens, mask, positions, batch, withPast: true);
        PastLength += 1;
        return logits;
    }

    private float[] Run(InferenceSession session, long[] ids, long[] mask, long[] positions, int batch, bool withPast)
    {
        // OrtValues over the managed arrays (pinned, no copy) for the three token inputs.
        using OrtValue idsValue = OrtValue.CreateTensorValueFromMemory(ids, [batch, ids.Length / batch]);
        using OrtValue maskValue = OrtValue.CreateTensorValueFromMemory(mask, [batch, mask.Length / batch]);
        using OrtValue positionValue =
            OrtValue.CreateTensorValueFromMemory(positions, [batch, positions.Length / batch]);
        using OrtIoBinding binding = session.CreateIoBinding();
        binding.BindInput(ExportSessions.InputIds, idsValue);
        binding.BindInput(ExportSessions.AttentionMask, maskValue);
        binding.BindInput(ExportSessions.PositionIds, positionValue);
        if (withPast)
        {
            for (int i = 0; i < _past.Length; i++)
            {
                binding.BindInput(sessions.PastNames[i], _past[i]);
            }
        }
        binding.BindOutputToDevice(ExportSessions.Logits, OrtMemoryInfo.DefaultInstance);  // the host reads these
        foreach (string name in sessions.PresentNames)
        {
            binding.BindOutputToDevice(name, sessions.KvMemory);  // ONNX Runtime allocates them on the device
        }
        using (var runOptions = new RunOptions())
        {
            session.RunWithBinding(runOptions, binding);
        }

        // In binding order: logits, then present.*. The collection is not disposed as a whole: the presents live on.
        OrtValue[] outputs = binding.GetOutputValues().ToArray();
        float[] last;
        using (OrtValue logits = outputs[0])
        {
            long[] shape = logits.GetTensorTypeAndShape().Shape;  // (B, S, V): S = 1 or the new tokens
            int positionsOut = (int)shape[1], vocab = (int)shape[2];
            ReadOnlySpan<float> data = logits.GetTensorDataAsSpan<float>();
            last = new float[batch * vocab];  // (B, V)
            for (int row = 0; row < batch; row++)
            {
                int start = (row * positionsOut + positionsOut - 1) * vocab;  // the row's last position
                data.Slice(start, vocab).CopyTo(last.AsSpan(row * vocab));
            }
        }
        DisposePast();
        _past = outputs[1..];  // the next step's past
        return last;
    }

    private void DisposePast()
    {
        foreach (OrtValue value in _past)
        {
            value.Dispose();
        }
        _past = [];
    }

    public void Dispose() => DisposePast();
}
