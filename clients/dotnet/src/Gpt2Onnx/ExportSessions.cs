// The two ONNX Runtime sessions of one export folder (prefill and decode), shared by every generation and thread:
// InferenceSession.Run is safe to call concurrently, and each generation keeps its own KV cache (KvRunner).
using Microsoft.ML.OnnxRuntime;
using Microsoft.ML.OnnxRuntime.Tensors;

namespace Gpt2Onnx;

/// <summary>The two sessions of one export folder and the names that join them; shared by every KvRunner.</summary>
public sealed class ExportSessions : IDisposable
{
    // The contract's token inputs and logits output (gpt2_onnx/names.py); KV names come from the manifest.
    internal const string InputIds = "input_ids", AttentionMask = "attention_mask", PositionIds = "position_ids";
    internal const string Logits = "logits";

    private readonly bool _ownsKvMemory;

    /// <summary>Opens both graphs of <paramref name="folder"/> as <paramref name="manifest"/> describes them.</summary>
    /// <param name="folder">The export folder.</param>
    /// <param name="manifest">Its manifest.json, read.</param>
    /// <param name="provider">"cpu" or "cuda".</param>
    /// <param name="deviceId">The CUDA device (ignored on the CPU).</param>
    /// <param name="shareWeights">Float32 on the CPU: both sessions read one map of the weights file, prepacking
    /// off (weights in memory once). False, or where that does not apply: ONNX Runtime loads and prepacks the
    /// weights per session.</param>
    /// <param name="intraOpThreads">ONNX Runtime's intra-op threads per session; 0 leaves its default (the cores).</param>
    /// <exception cref="ProviderUnavailableException">CUDA was asked for and this process's ONNX Runtime has none.</exception>
    public ExportSessions(string folder, Manifest manifest, string provider, int deviceId, bool shareWeights = true,
        int intraOpThreads = 0)
    {
        Manifest = manifest;
        Provider = provider;
        try
        {
            using SessionOptions options = CreateOptions(provider, deviceId, intraOpThreads);
            // Both graphs read the one external weights file beside them (model.onnx.data), unless the sessions take
            // its tensors from one map of it (the same rule as runtimes/session.py and the C++ client).
            if (shareWeights && provider == "cpu" && manifest.Precision == "float32" && manifest.WeightsIndex.Count > 0)
            {
                SharedWeights = new MappedWeights(Path.Combine(folder, manifest.WeightsFile), manifest.WeightsIndex);
                SharedWeights.AddTo(options);
            }
            Prefill = new InferenceSession(Path.Combine(folder, manifest.Prefill.File), options);
            Decode = new InferenceSession(Path.Combine(folder, manifest.Decode.File), options);
            (PastNames, PresentNames, KvElementType) = CheckContract(Prefill, Decode, manifest);
        }
        catch
        {
            // A refusal after the sessions exist (names, KV pairing, types) must not leave them, or the map, open.
            Decode?.Dispose();
            Prefill?.Dispose();
            SharedWeights?.Dispose();
            RunOptions.Dispose();
            throw;
        }
        _ownsKvMemory = provider == "cuda";
        KvMemory = _ownsKvMemory
            ? new OrtMemoryInfo(OrtMemoryInfo.allocatorCUDA, OrtAllocatorType.DeviceAllocator, deviceId,
                OrtMemType.Default)
            : OrtMemoryInfo.DefaultInstance;
    }

    /// <summary>The manifest the sessions were opened with.</summary>
    public Manifest Manifest { get; }
    /// <summary>"cpu" or "cuda".</summary>
    public string Provider { get; }
    /// <summary>The one map of the weights both sessions read; null: ONNX Runtime loaded the weights per session.</summary>
    public MappedWeights? SharedWeights { get; }
    /// <summary>The prefill graph's session.</summary>
    public InferenceSession Prefill { get; }
    /// <summary>The decode graph's session.</summary>
    public InferenceSession Decode { get; }
    /// <summary>Where the KV cache lives: host or CUDA device.</summary>
    public OrtMemoryInfo KvMemory { get; }
    /// <summary>Decode's KV inputs, (layer, key/value) order.</summary>
    public IReadOnlyList<string> PastNames { get; }
    /// <summary>Both graphs' KV outputs, the same order.</summary>
    public IReadOnlyList<string> PresentNames { get; }
    /// <summary>The KV cache's element type (float32 or float16).</summary>
    public TensorElementType KvElementType { get; }

    /// <summary>One RunOptions for every decode step of every generation (it holds no per-run state).</summary>
    internal RunOptions RunOptions { get; } = new();

    private static SessionOptions CreateOptions(string provider, int deviceId, int intraOpThreads)
    {
        var options = new SessionOptions();
        try
        {
            AddProvider(options, provider, deviceId);
            if (intraOpThreads > 0)
            {
                options.IntraOpNumThreads = intraOpThreads;
                options.InterOpNumThreads = 1;
            }
            // The prefill and decode sessions share the cores: each one's threads spin between a run's operators and
            // stop as soon as the run returns, instead of spinning on into the other session's next run
            // (docs/generation.md, "Two sessions never spin against each other"; the same rule as the C++ client).
            options.AddSessionConfigEntry("session.force_spinning_stop", "1");
            return options;
        }
        catch
        {
            options.Dispose();
            throw;
        }
    }

    // The graphs against the manifest: every listed name exists, the KV inputs and outputs pair up over the layers,
    // logits are float32 and the cache float32 or float16.
    private static (IReadOnlyList<string> Past, IReadOnlyList<string> Present, TensorElementType Kv) CheckContract(
        InferenceSession prefill, InferenceSession decode, Manifest manifest)
    {
        CheckNames(prefill, manifest.Prefill);
        CheckNames(decode, manifest.Decode);
        string[] past = manifest.Decode.Inputs.Where(n => n is not (InputIds or AttentionMask or PositionIds)).ToArray();
        string[] present = manifest.Decode.Outputs.Where(n => n != Logits).ToArray();
        int expected = 2 * manifest.NLayer;  // a key and a value per layer
        if (past.Length != expected || present.Length != expected
            || !manifest.Prefill.Outputs.Where(n => n != Logits).SequenceEqual(present))
        {
            throw new ExportFolderException(
                $"manifest.json: the KV inputs and outputs do not pair up over {manifest.NLayer} layers");
        }
        if (decode.OutputMetadata[Logits].ElementDataType != TensorElementType.Float)
        {
            throw new ExportFolderException($"{manifest.Decode.File}: logits must be float32");
        }
        TensorElementType kv = decode.OutputMetadata[present[0]].ElementDataType;
        if (kv is not (TensorElementType.Float or TensorElementType.Float16))
        {
            throw new ExportFolderException($"{manifest.Decode.File}: KV cache of type {kv} is not supported");
        }
        return (past, present, kv);
    }

    private static void AddProvider(SessionOptions options, string provider, int deviceId)
    {
        if (provider == "cpu")
        {
            return;
        }
        if (provider != "cuda")
        {
            throw new ArgumentException($"unknown provider '{provider}'; choose cpu or cuda", nameof(provider));
        }
        // Never a silent CPU run: the CPU-only native package (Microsoft.ML.OnnxRuntime) has no CUDA provider, and a
        // CUDA build without its libraries fails here too.
        if (!OrtEnv.Instance().GetAvailableProviders().Contains("CUDAExecutionProvider"))
        {
            throw new ProviderUnavailableException("cuda",
                "provider 'cuda' is not available: this process loaded an ONNX Runtime without CUDA "
                + "(reference Microsoft.ML.OnnxRuntime.Gpu instead of Microsoft.ML.OnnxRuntime)");
        }
        try
        {
            options.AppendExecutionProvider_CUDA(deviceId);
        }
        catch (OnnxRuntimeException e)
        {
            throw new ProviderUnavailableException("cuda",
                $"provider 'cuda' could not start on device {deviceId}: {e.Message.Split('\n')[0]}");
        }
    }

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

    /// <summary>Releases both sessions, then the weights map they read.</summary>
    public void Dispose()
    {
        Prefill.Dispose();
        Decode.Dispose();
        RunOptions.Dispose();
        SharedWeights?.Dispose();  // after the sessions, whose initializers point into it
        if (_ownsKvMemory)
        {
            KvMemory.Dispose();  // DefaultInstance is a process-wide singleton: never disposed here
        }
    }
}
