// Unit tests of batching.hpp: left padding, the position-id rule, argmax and top-k. No ONNX Runtime needed.
#include <cmath>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "batching.hpp"

namespace {

int failures = 0;
int checks = 0;

template <typename A, typename B>
void expect_eq(const A& got, const B& expected, const std::string& what) {
  ++checks;
  if (!(got == expected)) {
    ++failures;
    std::cerr << "FAIL " << what << "\n";
  }
}

template <typename F>
void expect_throws(F&& f, const std::string& what) {
  ++checks;
  try {
    f();
  } catch (const std::invalid_argument&) {
    return;
  }
  ++failures;
  std::cerr << "FAIL " << what << " did not throw std::invalid_argument\n";
}

using V = std::vector<int64_t>;

void left_pad_puts_tokens_right() {
  const auto batch = gpt2::left_pad({{5, 6, 7}, {8}}, 99);
  expect_eq(batch.input_ids.rows, 2, "rows");
  expect_eq(batch.input_ids.cols, 3, "cols");
  expect_eq(batch.input_ids.data, V{5, 6, 7, 99, 99, 8}, "padded ids");
  expect_eq(batch.attention_mask.data, V{1, 1, 1, 0, 0, 1}, "mask");
  expect_throws([] { gpt2::left_pad({}, 0); }, "empty batch");
  expect_throws([] { gpt2::left_pad({{1}, {}}, 0); }, "empty sequence");
}

void position_ids_follow_cumsum_rule() {
  const gpt2::Int64Matrix mask{2, 4, {0, 0, 1, 1, 1, 1, 1, 1}};
  expect_eq(gpt2::position_ids(mask, 4).data, V{0, 0, 0, 1, 0, 1, 2, 3}, "prefill positions");
  expect_eq(gpt2::position_ids(mask, 1).data, V{1, 3}, "last position per row");
  // A decode step after left padding: the new token's position counts real tokens only.
  const auto grown = gpt2::append_ones_column(mask);
  expect_eq(grown.cols, 5, "grown mask width");
  expect_eq(grown.data, V{0, 0, 1, 1, 1, 1, 1, 1, 1, 1}, "grown mask");
  expect_eq(gpt2::position_ids(grown, 1).data, V{2, 4}, "decode positions");
  // Right padding inside the sequence (as onnxruntime-genai batches) is the same rule.
  const gpt2::Int64Matrix holes{1, 5, {1, 1, 0, 0, 1}};
  expect_eq(gpt2::position_ids(holes, 5).data, V{0, 1, 0, 0, 2}, "positions across a gap");
  expect_throws([&] { gpt2::position_ids(mask, 0); }, "last_n 0");
  expect_throws([&] { gpt2::position_ids(mask, 5); }, "last_n beyond width");
}

void argmax_and_top_k() {
  const std::vector<float> logits{0.5f, 2.0f, -1.0f, 2.0f, 1.5f, NAN};
  expect_eq(gpt2::argmax(logits.data(), 5), 1, "argmax takes the first of equal maxima");
  expect_eq(gpt2::top_k(logits.data(), 5, 3), V{1, 3, 4}, "top-3, ties by index");
  expect_eq(gpt2::top_k(logits.data(), 2, 5), V{1, 0}, "k larger than the vocabulary");
}

}  // namespace

int main() {
  left_pad_puts_tokens_right();
  position_ids_follow_cumsum_rule();
  argmax_and_top_k();
  std::cout << "batching: " << checks - failures << " of " << checks << " checks ok\n";
  return failures == 0 ? 0 : 1;
}
