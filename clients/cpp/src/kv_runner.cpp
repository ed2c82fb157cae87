#include "kv_runner.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "gpt2_onnx/errors.hpp"
#include "names.hpp"

namespace gpt2_onnx::detail {
namespace {

Ort::Value int64_tensor(const Ort::MemoryInfo& host, int64_t* data, int64_t rows, int64_t cols) {
  const std::array<int64_t, 2> shape{rows, cols};
  return Ort::Value::CreateTensor<int64_t>(host, data, static_cast<size_t>(rows * cols), shape.data(), shape.size());
}

// The type and shape ONNX Runtime states for output `name` of `session` (-1 for a symbolic dimension).
Ort::ConstTensorTypeAndShapeInfo output_info(Ort::Session& session, const std::string& name,
                                             std::vector<Ort::TypeInfo>& keep) {
  Ort::AllocatorWithDefaultOptions allocator;
  for (size_t i = 0; i < session.GetOutputCount(); ++i) {
    if (session.GetOutputNameAllocated(i, allocator).get() == name) {
      keep.push_back(session.GetOutputTypeInfo(i));
      return keep.back().GetTensorTypeAndShapeInfo();
    }
  }
  throw ManifestError("the graph has no output " + name);
}

size_t element_size(ONNXTensorElementDataType type) {
  switch (type) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return 4;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: return 2;
    default: throw ManifestError("the KV cache is neither float32 nor float16");
  }
}

}  // namespace

KvRunner::KvRunner(ExportSessions& sessions, int64_t batch, int64_t capacity)
    : sessions_(&sessions),
      batch_(batch),
      capacity_(capacity),
      heads_(sessions.manifest().n_head),
      head_dim_(sessions.manifest().head_dim),
      vocab_(sessions.manifest().vocab_size),
      host_(Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault)),
      logits_(static_cast<size_t>(batch * vocab_)),
      mask_(static_cast<size_t>(batch * capacity)),
      ids_(static_cast<size_t>(batch)),
      positions_(static_cast<size_t>(batch)),
      real_(static_cast<size_t>(batch)),
      prefill_binding_(sessions.prefill()),
      decode_binding_(sessions.decode()) {
  std::vector<Ort::TypeInfo> keep;  // the infos below point into these
  const auto present = output_info(sessions.decode(), sessions.present_names().front(), keep);
  kv_type_ = present.GetElementType();
  kv_element_size_ = element_size(kv_type_);
  const auto prefill_logits = output_info(sessions.prefill(), kLogits, keep).GetShape();  // (B, 1 or S, V)
  prefill_last_only_ = prefill_logits.size() == 3 && prefill_logits[1] == 1;

  const bool on_host = sessions.kv_memory().GetDeviceType() == OrtMemoryInfoDeviceType_CPU;
  if (!on_host) kv_allocator_ = Ort::Allocator(sessions.prefill(), sessions.kv_memory());
  Ort::AllocatorWithDefaultOptions host_allocator;
  const size_t bytes = static_cast<size_t>(batch * heads_ * capacity * head_dim_) * kv_element_size_;
  kv_info_ = on_host ? host_allocator.GetInfo() : kv_allocator_.GetInfo();
  for (auto& buffers : kv_) {
    for (size_t i = 0; i < sessions.present_names().size(); ++i) {
      buffers.push_back(on_host ? host_allocator.GetAllocation(bytes) : kv_allocator_.GetAllocation(bytes));
    }
  }
}

Ort::Value KvRunner::kv_view(int parity, size_t tensor, int64_t length) {
  if (length > capacity_) throw std::logic_error("KvRunner: the cache is full");
  Ort::MemoryAllocation& memory = kv_[static_cast<size_t>(parity)][tensor];
  const std::array<int64_t, 4> shape{batch_, heads_, length, head_dim_};  // dense at the buffer's start
  const size_t bytes = static_cast<size_t>(batch_ * heads_ * length * head_dim_) * kv_element_size_;
  return Ort::Value::CreateTensor(kv_info_, memory.get(), bytes, shape.data(), shape.size(), kv_type_);
}

void KvRunner::bind_cache(Ort::IoBinding& binding, int parity_in, int64_t length_in, int parity_out,
                          int64_t length_out) {
  const auto& pasts = sessions_->past_names();
  const auto& presents = sessions_->present_names();
  for (size_t i = 0; i < presents.size(); ++i) {
    if (length_in > 0) binding.BindInput(pasts[i].c_str(), kv_view(parity_in, i, length_in));
    binding.BindOutput(presents[i].c_str(), kv_view(parity_out, i, length_out));
  }
}

void KvRunner::bind_logits(Ort::IoBinding& binding, bool last_position_only) {
  if (!last_position_only) {  // ONNX Runtime allocates (B, S, V); take_last_position copies the last row out
    binding.BindOutput(kLogits, host_);
    return;
  }
  const std::array<int64_t, 3> shape{batch_, 1, vocab_};
  binding.BindOutput(kLogits, Ort::Value::CreateTensor<float>(host_, logits_.data(), logits_.size(), shape.data(),
                                                              shape.size()));
}

void KvRunner::take_last_position(Ort::IoBinding& binding) {
  std::vector<Ort::Value> outputs = binding.GetOutputValues();  // logits first: it was bound first
  const auto shape = outputs[0].GetTensorTypeAndShapeInfo().GetShape();  // (B, S, V)
  const int64_t positions = shape[1];
  const float* data = outputs[0].GetTensorData<float>();
  for (int64_t row = 0; row < batch_; ++row) {
    const float* last = data + (row * positions + positions - 1) * vocab_;
    std::copy(last, last + vocab_, logits_.begin() + row * vocab_);
  }
}

const float* KvRunner::prefill(const Int64Matrix& input_ids, const Int64Matrix& attention_mask) {
  if (input_ids.rows != batch_ || attention_mask.rows != batch_ || input_ids.cols != attention_mask.cols) {
    throw std::invalid_argument("KvRunner::prefill: input_ids and attention_mask must both be (B, T)");
  }
  const int64_t length = input_ids.cols;
  if (length > capacity_) throw std::logic_error("KvRunner: the prompt is longer than the capacity");
  std::vector<int64_t> ids = input_ids.data;                                        // (B, T)
  std::vector<int64_t> positions = position_ids(attention_mask, length).data;       // (B, T)
  std::copy(attention_mask.data.begin(), attention_mask.data.end(), mask_.begin());  // (B, T), dense
  for (int64_t row = 0; row < batch_; ++row) {
    real_[row] = std::count(attention_mask.data.begin() + row * length,
                            attention_mask.data.begin() + (row + 1) * length, int64_t{1});
  }
  Ort::IoBinding& binding = prefill_binding_;
  binding.ClearBoundInputs();
  binding.ClearBoundOutputs();
  binding.BindInput(kInputIds, int64_tensor(host_, ids.data(), batch_, length));
  binding.BindInput(kAttentionMask, int64_tensor(host_, mask_.data(), batch_, length));
  binding.BindInput(kPositionIds, int64_tensor(host_, positions.data(), batch_, length));
  bind_logits(binding, prefill_last_only_);  // first, so that take_last_position finds it first
  bind_cache(binding, 0, 0, 0, length);
  sessions_->prefill().Run(Ort::RunOptions{nullptr}, binding);
  if (!prefill_last_only_) take_last_position(binding);
  past_length_ = length;
  parity_ = 0;
  return logits_.data();
}

const float* KvRunner::decode(const std::vector<int64_t>& tokens) {
  if (past_length_ == 0) throw std::logic_error("KvRunner::decode before prefill");
  if (static_cast<int64_t>(tokens.size()) != batch_) throw std::invalid_argument("KvRunner::decode: one token a row");
  const int64_t past = past_length_, total = past + 1;
  // The mask (B, L) -> (B, L + 1) in place: rows move to their new starts, the last row first (rows only move
  // right), and each gets a 1 for its new token. One row moves nothing.
  for (int64_t row = batch_ - 1; row >= 0; --row) {
    if (row > 0) std::memmove(&mask_[row * total], &mask_[row * past], static_cast<size_t>(past) * sizeof(int64_t));
    mask_[row * total + past] = 1;
    ids_[row] = tokens[row];
    positions_[row] = real_[row]++;  // cumsum(mask) - 1 at the new token
  }
  Ort::IoBinding& binding = decode_binding_;
  binding.ClearBoundInputs();
  binding.ClearBoundOutputs();
  binding.BindInput(kInputIds, int64_tensor(host_, ids_.data(), batch_, 1));
  binding.BindInput(kAttentionMask, int64_tensor(host_, mask_.data(), batch_, total));
  binding.BindInput(kPositionIds, int64_tensor(host_, positions_.data(), batch_, 1));
  bind_logits(binding, /*last_position_only=*/true);  // one new token: (B, 1, V)
  bind_cache(binding, parity_, past, 1 - parity_, total);
  sessions_->decode().Run(Ort::RunOptions{nullptr}, binding);
  past_length_ = total;
  parity_ = 1 - parity_;
  return logits_.data();
}

}  // namespace gpt2_onnx::detail
