// Prefill and decode steps with ONNX Runtime IO binding: the KV cache never leaves ONNX Runtime's memory. Internal.
//
// The cache lives in two buffers per KV tensor, allocated once per generation by ONNX Runtime's allocator for the
// provider's memory (host, or the CUDA device), each large enough for (B, n_head, capacity, head_dim). The steps
// alternate between them: a step reads its past laid out densely at the start of one buffer and the graph writes
// the present, one position longer, into the other:
//
//   prefill:  input_ids (B, T) ──prefill.onnx──► present → buffer[0] as (B, n_head, T, head_dim)
//   step k:   past = buffer[k % 2] as (B, n_head, L, head_dim) ──decode.onnx──► present → buffer[(k + 1) % 2], L + 1
//
// The logits come back into one reused (B, V) host buffer (where the graph returns the last position only, as every
// current export does), and the token inputs are rewritten in reused host buffers, so a step allocates nothing but
// the small OrtValue headers over those buffers.
#pragma once

#include <onnxruntime_cxx_api.h>

#include <array>
#include <cstdint>
#include <vector>

#include "batching.hpp"
#include "sessions.hpp"

namespace gpt2_onnx::detail {

// One batch of sequences: prefill() once, then decode() per step, within `capacity` positions. Not shared between
// threads.
class KvRunner {
 public:
  // A batch of `batch` rows that holds at most `capacity` positions (the longest prompt + new tokens).
  KvRunner(ExportSessions& sessions, int64_t batch, int64_t capacity);

  // input_ids and attention_mask (B, T), left-padded -> the last position's logits (B, V), row-major, valid until
  // the next call.
  const float* prefill(const Int64Matrix& input_ids, const Int64Matrix& attention_mask);

  // One new token per row (B,); each row's mask grows by a 1 -> logits (B, V), valid until the next call.
  const float* decode(const std::vector<int64_t>& tokens);

  int64_t past_length() const { return past_length_; }

 private:
  void bind_cache(Ort::IoBinding& binding, int parity_in, int64_t length_in, int parity_out, int64_t length_out);
  void bind_logits(Ort::IoBinding& binding, bool last_position_only);
  void take_last_position(Ort::IoBinding& binding);  // older exports' prefill: logits of every position
  Ort::Value kv_view(int parity, size_t tensor, int64_t length);

  ExportSessions* sessions_;
  int64_t batch_, capacity_, heads_, head_dim_, vocab_;
  ONNXTensorElementDataType kv_type_;
  size_t kv_element_size_;
  Ort::Allocator kv_allocator_{nullptr};  // the provider's allocator (CUDA); null: the default CPU one
  Ort::ConstMemoryInfo kv_info_{nullptr};  // where the KV buffers are
  std::array<std::vector<Ort::MemoryAllocation>, 2> kv_;  // [parity][tensor]: (B, n_head, capacity, head_dim) each
  Ort::MemoryInfo host_{nullptr};
  std::vector<float> logits_;           // (B, V)
  std::vector<int64_t> mask_;           // (B, L): capacity B × capacity, laid out densely for the current L
  std::vector<int64_t> ids_, positions_;  // (B, 1) of the current step
  std::vector<int64_t> real_;           // (B,): real tokens per row so far (the next position id)
  bool prefill_last_only_;              // prefill.onnx's logits are (B, 1, V)
  Ort::IoBinding prefill_binding_, decode_binding_;
  int64_t past_length_ = 0;
  int parity_ = 0;  // which buffer holds the past
};

}  // namespace gpt2_onnx::detail
