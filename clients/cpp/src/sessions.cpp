#include "sessions.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <mutex>
#include <set>
#include <sstream>
#include <utility>

#include "gpt2_onnx/errors.hpp"
#include "names.hpp"

namespace gpt2_onnx::detail {
namespace {

// "past_key_values.3.key" and "present.3.key" pair on what follows the first dot.
std::string layer_suffix(const std::string& name) { return name.substr(name.find('.') + 1); }

void append_cuda(Ort::SessionOptions& options, int device_id) {
  const auto providers = Ort::GetAvailableProviders();
  if (std::find(providers.begin(), providers.end(), "CUDAExecutionProvider") == providers.end()) {
    throw ProviderError("ONNX Runtime " + std::string(Ort::GetVersionString()) +
                        " here has no CUDA provider; use a GPU build (Microsoft.ML.OnnxRuntime.Gpu, or "
                        "ORT_PACKAGE=onnxruntime-gpu clients/cpp/get-onnxruntime.sh)");
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

Ort::SessionOptions session_options(const ModelOptions& options) {
  Ort::SessionOptions so;
  if (options.intra_op_threads > 0) so.SetIntraOpNumThreads(options.intra_op_threads);
  if (options.inter_op_threads > 0) so.SetInterOpNumThreads(options.inter_op_threads);
  // The prefill and decode sessions share the cores: each one's threads spin between a run's operators and stop
  // as soon as the run returns, instead of spinning on into the other session's next run (docs/generation.md, "Two
  // sessions never spin against each other").
  so.AddConfigEntry("session.force_spinning_stop", "1");
  if (options.provider == "cuda") {
    append_cuda(so, options.device_id);
  } else if (options.provider != "cpu") {
    throw OptionsError("unknown provider '" + options.provider + "'; choose cpu or cuda");
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
        throw ManifestError(spec.file + " has no tensor '" + tensor.name + "' although manifest.json lists it");
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
WeightLoading effective_loading(const ModelOptions& options, const Manifest& manifest) {
  if (options.weights == WeightLoading::per_session || options.provider != "cpu" || manifest.weights_index.empty() ||
      !weight_map_supported()) {
    return WeightLoading::per_session;
  }
  if (options.weights == WeightLoading::shared_unpacked && manifest.precision != "float32") {
    return WeightLoading::shared_prepacked;  // MatMulNBits needs its packed layout
  }
  return options.weights;
}

// "1.31.1" < "1.16.0"? Compared as numbers, part by part; a part's leading digits count ("0rc1" -> 0).
bool older_than(const std::string& version, const std::string& minimum) {
  std::istringstream a(version), b(minimum);
  std::string x, y;
  while (std::getline(b, y, '.')) {
    if (!std::getline(a, x, '.')) x = "0";
    const long have = std::strtol(x.c_str(), nullptr, 10), need = std::strtol(y.c_str(), nullptr, 10);
    if (have != need) return have < need;
  }
  return false;
}

}  // namespace

void init_onnxruntime() {
  static std::once_flag once;
  static const OrtApi* api = nullptr;
  std::call_once(once, [] { api = OrtGetApiBase()->GetApi(ORT_API_VERSION); });  // null: older than the headers
  if (api == nullptr) {
    throw RuntimeError("ONNX Runtime " + std::string(OrtGetApiBase()->GetVersionString()) +
                       " is older than the headers gpt2_onnx was built with (C API " +
                       std::to_string(ORT_API_VERSION) + "); use a library at least as new");
  }
  Ort::InitApi(api);
}

void check_onnxruntime_version(const Manifest& manifest) {
  const std::string version = OrtGetApiBase()->GetVersionString();
  if (!manifest.min_onnxruntime.empty() && older_than(version, manifest.min_onnxruntime)) {
    throw RuntimeError("ONNX Runtime " + version + " is older than this export needs (" + manifest.min_onnxruntime +
                       ")");
  }
}

ExportSessions::ExportSessions(Ort::Env& env, const std::filesystem::path& folder, const Manifest& manifest,
                               const ModelOptions& options)
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
  pair_kv_names();
  kv_memory_ = options.provider == "cuda"
                   ? Ort::MemoryInfo("Cuda", OrtDeviceAllocator, options.device_id, OrtMemTypeDefault)
                   : Ort::MemoryInfo::CreateCpu(OrtDeviceAllocator, OrtMemTypeDefault);
}

void ExportSessions::pair_kv_names() {
  for (const auto& tensor : manifest_.decode.inputs) {
    if (!is_token_input(tensor.name)) past_names_.push_back(tensor.name);
  }
  present_names_ = kv_outputs(manifest_.decode);
  const auto expected = static_cast<size_t>(2 * manifest_.n_layer);  // a key and a value per layer
  if (past_names_.size() != expected || present_names_.size() != expected ||
      kv_outputs(manifest_.prefill) != present_names_) {
    throw ManifestError("manifest.json: the KV inputs and outputs do not pair up over " +
                        std::to_string(manifest_.n_layer) + " layers");
  }
  for (size_t i = 0; i < expected; ++i) {
    if (layer_suffix(past_names_[i]) != layer_suffix(present_names_[i])) {
      throw ManifestError("manifest.json: " + past_names_[i] + " does not pair with " + present_names_[i]);
    }
  }
}

}  // namespace gpt2_onnx::detail
