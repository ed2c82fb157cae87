#include "kv_runner.hpp"

#include <algorithm>
#include <array>
#include <memory>
#include <set>
#include <utility>
#include <stdexcept>

namespace gpt2 {
namespace {

// The contract's token inputs and logits output (gpt2_onnx/names.py); KV names come from the manifest.
constexpr const char* kInputIds = "input_ids";
constexpr const char* kAttentionMask = "attention_mask";
constexpr const char* kPositionIds = "position_ids";
constexpr const char* kLogits = "logits";

bool is_token_input(const std::string& name) {
  return name == kInputIds || name == kAttentionMask || name == kPositionIds;
}

// "past_key_values.3.key" and "present.3.key" pair on what follows the first dot.
std::string layer_suffix(const std::string& name) { return name.substr(name.find('.') + 1); }

void append_cuda(Ort::SessionOptions& options, int device_id) {
  const auto providers = Ort::GetAvailableProviders();
  if (std::find(providers.begin(), providers.end(), "CUDAExecutionProvider") == providers.end()) {
    throw ProviderError(
        "this ONNX Runtime build has no CUDA provider; use the onnxruntime-gpu build "
        "(ORT_PACKAGE=onnxruntime-gpu clients/cpp/get-onnxruntime.sh)");
  }
  const OrtApi& api = Ort::GetApi();
  OrtCUDAProviderOptionsV2* raw = nullptr;
  Ort::ThrowOnError(api.CreateCUDAProviderOptions(&raw));
  std::unique_ptr<OrtCUDAProviderOptionsV2, decltype(api.ReleaseCUDAProviderOptions)> cuda(
      raw, api.ReleaseCUDAProviderOptions);
  const std::string device = std::to_string(device_id);
  const std::array<const char*, 1> keys{"device_id"};
  const std::array<const char*, 1> values{device.c_str()};
  Ort::ThrowOnError(api.UpdateCUDAProviderOptions(cuda.get(), keys.data(), values.data(), keys.size()));
  options.AppendExecutionProvider_CUDA_V2(*cuda);  // no silent fallback: a CUDA failure is an error
}

Ort::SessionOptions session_options(const RuntimeOptions& options) {
  Ort::SessionOptions so;
  if (options.intra_op_threads > 0) so.SetIntraOpNumThreads(options.intra_op_threads);
  // The prefill and decode sessions share the cores: each one's threads spin between a run's operators and stop
  // as soon as the run returns, instead of spinning on into the other session's next run (docs/generation.md, "Two
  // sessions never spin against each other").
  so.AddConfigEntry("session.force_spinning_stop", "1");
  if (options.provider == "cuda") {
    append_cuda(so, options.device_id);
  } else if (options.provider != "cpu") {
    throw ProviderError("unknown provider '" + options.provider + "'; choose cpu or cuda");
  }
  return so;
}

// The manifest must describe the graph file it sits beside.
void check_graph_names(Ort::Session& session, const GraphSpec& spec) {
  Ort::AllocatorWithDefaultOptions allocator;
  std::set<std::string> in_graph;
  for (size_t i = 0; i < session.GetInputCount(); ++i) {
    in_graph.insert(session.GetInputNameAllocated(i, allocator).get());
  }
  for (size_t i = 0; i < session.GetOutputCount(); ++i) {
    in_graph.insert(session.GetOutputNameAllocated(i, allocator).get());
  }
  for (const auto* list : {&spec.inputs, &spec.outputs}) {
    for (const auto& tensor : *list) {
      if (!in_graph.count(tensor.name)) {
        throw ExportFolderError(spec.file + " has no tensor '" + tensor.name + "' although manifest.json lists it");
      }
    }
  }
}

std::vector<std::string> kv_outputs(const GraphSpec& spec) {
  std::vector<std::string> names;
  for (const auto& tensor : spec.outputs) {
    if (tensor.name != kLogits) names.push_back(tensor.name);
  }
  return names;
}

// The way the weights are loaded: the requested one where it applies (see WeightLoading).
WeightLoading effective_loading(const RuntimeOptions& options, const Manifest& manifest) {
  if (options.weights == WeightLoading::per_session || options.provider != "cpu" || manifest.weights_index.empty() ||
      !weight_map_supported()) {
    return WeightLoading::per_session;
  }
  if (options.weights == WeightLoading::shared_unpacked && manifest.precision != "float32") {
    return WeightLoading::shared_prepacked;  // MatMulNBits needs its packed layout
  }
  return options.weights;
}

Ort::Value int64_tensor(const Ort::MemoryInfo& host, Int64Matrix& matrix) {
  const std::array<int64_t, 2> shape{matrix.rows, matrix.cols};
  return Ort::Value::CreateTensor<int64_t>(host, matrix.data.data(), matrix.data.size(), shape.data(), shape.size());
}

}  // namespace

const char* to_string(WeightLoading loading) {
  switch (loading) {
    case WeightLoading::shared_prepacked:
      return "shared";
    case WeightLoading::shared_unpacked:
      return "shared-unpacked";
    case WeightLoading::per_session:
      return "per-session";
  }
  return "?";
}

ExportSessions::ExportSessions(Ort::Env& env, const std::filesystem::path& folder, const Manifest& manifest,
                               const RuntimeOptions& options)
    : manifest_(manifest) {
  Ort::SessionOptions so = session_options(options);
  loading_ = effective_loading(options, manifest);
  // Both graphs read the one external weights file beside them; ONNX Runtime resolves it from the graph's folder,
  // unless the sessions take its tensors from one map of it.
  OrtPrepackedWeightsContainer* container = nullptr;
  if (loading_ != WeightLoading::per_session) {
    weights_ = std::make_unique<MappedWeights>(folder / manifest.weights_file, manifest.weights_index);
    weights_->add_to(so, /*prepacking=*/loading_ == WeightLoading::shared_prepacked);
  }
  if (loading_ == WeightLoading::shared_prepacked) {
    Ort::ThrowOnError(Ort::GetApi().CreatePrepackedWeightsContainer(&container));
    prepacked_ = {container, Ort::GetApi().ReleasePrepackedWeightsContainer};
  }
  for (auto [session, file] : {std::pair{&prefill_, &manifest.prefill.file}, {&decode_, &manifest.decode.file}}) {
    const auto path = folder / *file;
    *session = container ? Ort::Session(env, path.c_str(), so, container) : Ort::Session(env, path.c_str(), so);
  }
  if (loading_ == WeightLoading::shared_prepacked) weights_->release_pages();  // the kernels read the packed copies
  check_graph_names(prefill_, manifest.prefill);
  check_graph_names(decode_, manifest.decode);

  for (const auto& tensor : manifest.decode.inputs) {
    if (!is_token_input(tensor.name)) past_names_.push_back(tensor.name);
  }
  present_names_ = kv_outputs(manifest.decode);
  const auto expected = static_cast<size_t>(2 * manifest.n_layer);  // a key and a value per layer
  if (past_names_.size() != expected || present_names_.size() != expected ||
      kv_outputs(manifest.prefill) != present_names_) {
    throw ExportFolderError("manifest.json: the KV inputs and outputs do not pair up over " +
                            std::to_string(manifest.n_layer) + " layers");
  }
  for (size_t i = 0; i < expected; ++i) {
    if (layer_suffix(past_names_[i]) != layer_suffix(present_names_[i])) {
      throw ExportFolderError("manifest.json: " + past_names_[i] + " does not pair with " + present_names_[i]);
    }
  }
  kv_memory_ = options.provider == "cuda"
                   ? Ort::MemoryInfo("Cuda", OrtDeviceAllocator, options.device_id, OrtMemTypeDefault)
                   : Ort::MemoryInfo::CreateCpu(OrtDeviceAllocator, OrtMemTypeDefault);
}

std::vector<float> KvRunner::prefill(const Int64Matrix& input_ids, const Int64Matrix& attention_mask) {
  Int64Matrix positions = position_ids(attention_mask, attention_mask.cols);  // (B, T)
  auto logits = run(sessions_.prefill(), input_ids, attention_mask, positions, /*with_past=*/false);
  past_length_ = input_ids.cols;
  return logits;
}

std::vector<float> KvRunner::decode(const std::vector<int64_t>& tokens, const Int64Matrix& attention_mask) {
  if (past_.empty()) throw std::logic_error("KvRunner::decode before prefill");
  if (attention_mask.cols != past_length_ + 1) throw std::invalid_argument("decode: mask must cover past + 1");
  Int64Matrix ids{static_cast<int64_t>(tokens.size()), 1, tokens};   // (B, 1)
  Int64Matrix positions = position_ids(attention_mask, 1);            // (B, 1)
  auto logits = run(sessions_.decode(), ids, attention_mask, positions, /*with_past=*/true);
  past_length_ += 1;
  return logits;
}

std::vector<float> KvRunner::run(Ort::Session& session, Int64Matrix input_ids, Int64Matrix attention_mask,
                                 Int64Matrix position_ids, bool with_past) {
  const auto host = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
  // The tensors wrap the matrices' buffers (no copy); both live until Run returns.
  Ort::Value ids = int64_tensor(host, input_ids);           // (B, N)
  Ort::Value mask = int64_tensor(host, attention_mask);     // (B, P + N)
  Ort::Value positions = int64_tensor(host, position_ids);  // (B, N)

  Ort::IoBinding binding(session);
  binding.BindInput(kInputIds, ids);
  binding.BindInput(kAttentionMask, mask);
  binding.BindInput(kPositionIds, positions);
  if (with_past) {
    for (size_t i = 0; i < past_.size(); ++i) binding.BindInput(sessions_.past_names()[i].c_str(), past_[i]);
  }
  binding.BindOutput(kLogits, host);  // the one output the host reads
  for (const auto& name : sessions_.present_names()) {
    binding.BindOutput(name.c_str(), sessions_.kv_memory());  // ONNX Runtime allocates it on the device
  }
  session.Run(Ort::RunOptions{nullptr}, binding);

  std::vector<Ort::Value> outputs = binding.GetOutputValues();  // in binding order: logits, then present.*
  const auto shape = outputs[0].GetTensorTypeAndShapeInfo().GetShape();  // (B, S, V): S = 1 or N
  const int64_t batch = shape[0], positions_out = shape[1], vocab = shape[2];
  const float* data = outputs[0].GetTensorData<float>();
  std::vector<float> last(static_cast<size_t>(batch * vocab));  // (B, V)
  for (int64_t row = 0; row < batch; ++row) {
    const float* src = data + (row * positions_out + positions_out - 1) * vocab;
    std::copy(src, src + vocab, last.begin() + row * vocab);
  }
  past_.clear();
  for (size_t i = 1; i < outputs.size(); ++i) past_.push_back(std::move(outputs[i]));  // next step's past
  return last;
}

}  // namespace gpt2
