// Batches as the graphs take them: left padding and the position-id rule. Plain C++ over row-major buffers, no ONNX
// Runtime: the unit tests exercise these alone. Internal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpt2_onnx::detail {

// A row-major (rows, cols) int64 matrix: input_ids, attention_mask or position_ids.
struct Int64Matrix {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<int64_t> data;  // rows * cols values

  int64_t at(int64_t row, int64_t col) const { return data[static_cast<size_t>(row * cols + col)]; }
};

struct PaddedBatch {
  Int64Matrix input_ids;       // (B, T), each row's tokens at its right end
  Int64Matrix attention_mask;  // (B, T), 1 for real tokens, 0 for padding
};

// Left-pad sequences to the longest: every row's last real token sits in the last column, so the prefill graph's
// last-position logits serve every row. Throws std::invalid_argument on an empty batch or an empty sequence.
PaddedBatch left_pad(const std::vector<std::vector<int64_t>>& sequences, int64_t pad_id);

// The contract's rule: position_ids = cumsum(attention_mask, axis=-1) - 1, padded positions set to 0 (their value
// is ignored). Returns the last `last_n` columns: (B, last_n); last_n = mask.cols for prefill, 1 for a decode step.
Int64Matrix position_ids(const Int64Matrix& attention_mask, int64_t last_n);

}  // namespace gpt2_onnx::detail
