// Left padding and the position-id rule (src/batching.hpp). No ONNX Runtime session needed.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "batching.hpp"

namespace gpt2_onnx::detail {
namespace {

using V = std::vector<int64_t>;

TEST(Batching, LeftPadPutsEveryRowsTokensAtTheRightEnd) {
  const auto batch = left_pad({{5, 6, 7}, {8}}, 99);
  EXPECT_EQ(batch.input_ids.rows, 2);
  EXPECT_EQ(batch.input_ids.cols, 3);
  EXPECT_EQ(batch.input_ids.data, (V{5, 6, 7, 99, 99, 8}));
  EXPECT_EQ(batch.attention_mask.data, (V{1, 1, 1, 0, 0, 1}));
}

TEST(Batching, LeftPadRefusesAnEmptyBatchOrSequence) {
  EXPECT_THROW(left_pad({}, 0), std::invalid_argument);
  EXPECT_THROW(left_pad({{1}, {}}, 0), std::invalid_argument);
}

TEST(Batching, PositionIdsFollowTheCumsumRule) {
  const Int64Matrix mask{2, 4, {0, 0, 1, 1, 1, 1, 1, 1}};
  EXPECT_EQ(position_ids(mask, 4).data, (V{0, 0, 0, 1, 0, 1, 2, 3}));
  EXPECT_EQ(position_ids(mask, 1).data, (V{1, 3}));
  // A decode step after left padding: the new token's position counts real tokens only.
  const Int64Matrix grown{2, 5, {0, 0, 1, 1, 1, 1, 1, 1, 1, 1}};  // each row one more real token
  EXPECT_EQ(position_ids(grown, 1).data, (V{2, 4}));
  // Padding inside the sequence (as onnxruntime-genai batches) is the same rule.
  const Int64Matrix holes{1, 5, {1, 1, 0, 0, 1}};
  EXPECT_EQ(position_ids(holes, 5).data, (V{0, 1, 0, 0, 2}));
}

TEST(Batching, PositionIdsRefuseAColumnCountOutsideTheMask) {
  const Int64Matrix mask{1, 4, {1, 1, 1, 1}};
  EXPECT_THROW(position_ids(mask, 0), std::invalid_argument);
  EXPECT_THROW(position_ids(mask, 5), std::invalid_argument);
}

}  // namespace
}  // namespace gpt2_onnx::detail
