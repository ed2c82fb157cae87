// Prefill and decode steps with ONNX Runtime IO binding: the KV cache never leaves ONNX Runtime's memory.
//
// Each step binds the previous step's present.* OrtValues as past_key_values.* directly (on CUDA they stay in GPU
// memory; on the CPU no copy is made). Only the small token inputs go in from the host and only the logits come
// back to it. Build the library with ORT_API_MANUAL_INIT and call Ort::InitApi first (see golden_check.cpp).
#pragma once

#include <onnxruntime_cxx_api.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "batching.hpp"
#include "export_files.hpp"
#include "mapped_weights.hpp"

namespace gpt2 {

// The requested execution provider cannot run here (never silently replaced by another).
class ProviderError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// How the two sessions get their weights on the CPU (a CUDA session copies them to the GPU either way, so there
// ONNX Runtime always loads them itself). GPT-2-small fp32, measured in docs/deploying.md.
enum class WeightLoading {
  // One map of the weights file for both sessions; each matrix prepacked once, into a container both sessions
  // use; then the map's pages are released from the process (the kernels read the packed copies, and the few
  // tensors still read from the map page back in). Prepacked speed with the weights in memory about once; while
  // loading, the map and the packed copies are both resident.
  shared_prepacked,
  // One map for both sessions, prepacking off: no packed copies at all. Slower (decode ~1.2×, prefill ~1.1×);
  // float32 only (MatMulNBits needs its packed layout), so quantized exports get shared_prepacked instead.
  shared_unpacked,
  // ONNX Runtime loads and prepacks the weights for each session: its default, about 2.7× the weights' bytes.
  per_session,
};

const char* to_string(WeightLoading loading);

struct RuntimeOptions {
  std::string provider = "cpu";  // "cpu" or "cuda"
  int device_id = 0;             // CUDA device
  int intra_op_threads = 0;      // 0: ONNX Runtime's default
  WeightLoading weights = WeightLoading::shared_prepacked;
};

// The two sessions of one export folder and the names that join them; shared by every KvRunner.
class ExportSessions {
 public:
  ExportSessions(Ort::Env& env, const std::filesystem::path& folder, const Manifest& manifest,
                 const RuntimeOptions& options);

  const Manifest& manifest() const { return manifest_; }
  const MappedWeights* shared_weights() const { return weights_.get(); }  // null: ONNX Runtime loaded them
  WeightLoading weight_loading() const { return loading_; }  // the way taken (see RuntimeOptions::weights)
  Ort::Session& prefill() { return prefill_; }
  Ort::Session& decode() { return decode_; }
  const Ort::MemoryInfo& kv_memory() const { return kv_memory_; }
  const std::vector<std::string>& past_names() const { return past_names_; }
  const std::vector<std::string>& present_names() const { return present_names_; }

 private:
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

// One batch of sequences: prefill() once, then decode() per step. Not shared between threads.
class KvRunner {
 public:
  explicit KvRunner(ExportSessions& sessions) : sessions_(sessions) {}

  // input_ids and attention_mask (B, T), left-padded → the last position's logits (B, V), row-major.
  std::vector<float> prefill(const Int64Matrix& input_ids, const Int64Matrix& attention_mask);

  // One new token per row (B) and the mask over past and new tokens (B, P + 1) → logits (B, V).
  std::vector<float> decode(const std::vector<int64_t>& tokens, const Int64Matrix& attention_mask);

  int64_t past_length() const { return past_length_; }

 private:
  std::vector<float> run(Ort::Session& session, Int64Matrix input_ids, Int64Matrix attention_mask,
                         Int64Matrix position_ids, bool with_past);

  ExportSessions& sessions_;
  std::vector<Ort::Value> past_;  // (B, n_head, P, head_dim) each, on the provider's device
  int64_t past_length_ = 0;
};

}  // namespace gpt2
