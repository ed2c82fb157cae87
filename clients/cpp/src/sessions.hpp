// The two ONNX Runtime sessions of one export folder (prefill and decode) and the names that join them. Internal.
// The library is built with ORT_API_MANUAL_INIT: init_onnxruntime() runs before any ONNX Runtime object exists.
#pragma once

#include <onnxruntime_cxx_api.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gpt2_onnx/manifest.hpp"
#include "gpt2_onnx/options.hpp"
#include "mapped_weights.hpp"

namespace gpt2_onnx::detail {

// Initialises the C++ API once per process; RuntimeError where the library is older than the headers.
void init_onnxruntime();

// RuntimeError where the loaded ONNX Runtime is older than the export's min_onnxruntime.
void check_onnxruntime_version(const Manifest& manifest);

class ExportSessions {
 public:
  ExportSessions(Ort::Env& env, const std::filesystem::path& folder, const Manifest& manifest,
                 const ModelOptions& options);

  const Manifest& manifest() const { return manifest_; }
  const MappedWeights* shared_weights() const { return weights_.get(); }  // null: ONNX Runtime loaded them
  WeightLoading weight_loading() const { return loading_; }               // the way taken
  Ort::Session& prefill() { return prefill_; }
  Ort::Session& decode() { return decode_; }
  const Ort::MemoryInfo& kv_memory() const { return kv_memory_; }
  const std::vector<std::string>& past_names() const { return past_names_; }
  const std::vector<std::string>& present_names() const { return present_names_; }

 private:
  void pair_kv_names();

  Manifest manifest_;
  WeightLoading loading_ = WeightLoading::per_session;
  // Declared before the sessions, which must go first: their initializers point into the map, and the packed
  // copies they use live in the container.
  std::unique_ptr<MappedWeights> weights_;
  std::unique_ptr<OrtPrepackedWeightsContainer, void (*)(OrtPrepackedWeightsContainer*)> prepacked_{nullptr,
                                                                                                     nullptr};
  Ort::Session prefill_{nullptr};
  Ort::Session decode_{nullptr};
  Ort::MemoryInfo kv_memory_{nullptr};      // where ONNX Runtime puts present.*: host or CUDA device
  std::vector<std::string> past_names_;     // decode's KV inputs, (layer, key/value) order
  std::vector<std::string> present_names_;  // both graphs' KV outputs, the same order
};

}  // namespace gpt2_onnx::detail
