#include "kv_runner.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <utility>

#include "names.hpp"

namespace gpt2_onnx::detail {
namespace {

Ort::Value int64_tensor(const Ort::MemoryInfo& host, Int64Matrix& matrix) {
  const std::array<int64_t, 2> shape{matrix.rows, matrix.cols};
  return Ort::Value::CreateTensor<int64_t>(host, matrix.data.data(), matrix.data.size(), shape.data(), shape.size());
}

}  // namespace

std::vector<float> KvRunner::prefill(const Int64Matrix& input_ids, const Int64Matrix& attention_mask) {
  Int64Matrix positions = position_ids(attention_mask, attention_mask.cols);  // (B, T)
  auto logits = run(sessions_->prefill(), input_ids, attention_mask, positions, /*with_past=*/false);
  past_length_ = input_ids.cols;
  return logits;
}

std::vector<float> KvRunner::decode(const std::vector<int64_t>& tokens, const Int64Matrix& attention_mask) {
  if (past_.empty()) throw std::logic_error("KvRunner::decode before prefill");
  if (attention_mask.cols != past_length_ + 1) throw std::invalid_argument("decode: mask must cover past + 1");
  Int64Matrix ids{static_cast<int64_t>(tokens.size()), 1, tokens};   // (B, 1)
  Int64Matrix positions = position_ids(attention_mask, 1);            // (B, 1)
  auto logits = run(sessions_->decode(), ids, attention_mask, positions, /*with_past=*/true);
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
    for (size_t i = 0; i < past_.size(); ++i) binding.BindInput(sessions_->past_names()[i].c_str(), past_[i]);
  }
  binding.BindOutput(kLogits, host);  // the one output the host reads
  for (const auto& name : sessions_->present_names()) {
    binding.BindOutput(name.c_str(), sessions_->kv_memory());  // ONNX Runtime allocates it on the device
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

}  // namespace gpt2_onnx::detail
