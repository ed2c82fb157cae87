#include "batching.hpp"

#include <algorithm>
#include <stdexcept>

namespace gpt2_onnx::detail {

PaddedBatch left_pad(const std::vector<std::vector<int64_t>>& sequences, int64_t pad_id) {
  if (sequences.empty()) throw std::invalid_argument("left_pad: empty batch");
  size_t width = 0;
  for (const auto& seq : sequences) {
    if (seq.empty()) throw std::invalid_argument("left_pad: every sequence needs at least one token");
    width = std::max(width, seq.size());
  }
  const auto rows = static_cast<int64_t>(sequences.size());
  const auto cols = static_cast<int64_t>(width);
  PaddedBatch batch{{rows, cols, std::vector<int64_t>(rows * cols, pad_id)},
                    {rows, cols, std::vector<int64_t>(rows * cols, 0)}};
  for (size_t row = 0; row < sequences.size(); ++row) {
    const size_t start = row * width + (width - sequences[row].size());  // padding fills the left
    std::copy(sequences[row].begin(), sequences[row].end(), batch.input_ids.data.begin() + start);
    std::fill_n(batch.attention_mask.data.begin() + start, sequences[row].size(), 1);
  }
  return batch;
}

Int64Matrix position_ids(const Int64Matrix& attention_mask, int64_t last_n) {
  if (last_n < 1 || last_n > attention_mask.cols) throw std::invalid_argument("position_ids: bad last_n");
  Int64Matrix out{attention_mask.rows, last_n, std::vector<int64_t>(attention_mask.rows * last_n, 0)};
  for (int64_t row = 0; row < attention_mask.rows; ++row) {
    int64_t seen = 0;  // running cumsum of the mask
    for (int64_t col = 0; col < attention_mask.cols; ++col) {
      const int64_t real = attention_mask.at(row, col);
      seen += real;
      const int64_t out_col = col - (attention_mask.cols - last_n);
      if (out_col >= 0) out.data[row * last_n + out_col] = real ? seen - 1 : 0;
    }
  }
  return out;
}

}  // namespace gpt2_onnx::detail
