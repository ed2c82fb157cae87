// Prefill and decode steps with ONNX Runtime IO binding: the KV cache never leaves ONNX Runtime's memory. Internal.
//
// Each step binds the previous step's present.* OrtValues as past_key_values.* directly (on CUDA they stay in GPU
// memory; on the CPU no copy is made). Only the small token inputs go in from the host and only the logits come
// back to it.
#pragma once

#include <onnxruntime_cxx_api.h>

#include <cstdint>
#include <vector>

#include "batching.hpp"
#include "sessions.hpp"

namespace gpt2_onnx::detail {

// One batch of sequences: prefill() once, then decode() per step. Not shared between threads.
class KvRunner {
 public:
  explicit KvRunner(ExportSessions& sessions) : sessions_(&sessions) {}

  // input_ids and attention_mask (B, T), left-padded -> the last position's logits (B, V), row-major.
  std::vector<float> prefill(const Int64Matrix& input_ids, const Int64Matrix& attention_mask);

  // One new token per row (B) and the mask over past and new tokens (B, P + 1) -> logits (B, V).
  std::vector<float> decode(const std::vector<int64_t>& tokens, const Int64Matrix& attention_mask);

  int64_t past_length() const { return past_length_; }

 private:
  std::vector<float> run(Ort::Session& session, Int64Matrix input_ids, Int64Matrix attention_mask,
                         Int64Matrix position_ids, bool with_past);

  ExportSessions* sessions_;
  std::vector<Ort::Value> past_;  // (B, n_head, P, head_dim) each, on the provider's device
  int64_t past_length_ = 0;
};

}  // namespace gpt2_onnx::detail
