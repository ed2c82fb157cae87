// check_weights_index (gpt2_onnx/manifest.hpp): what the library refuses before it maps a single byte.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpt2_onnx/errors.hpp"
#include "gpt2_onnx/manifest.hpp"

namespace gpt2_onnx {
namespace {

std::vector<WeightEntry> index_with(const WeightEntry& second) { return {{"a", "float32", {2, 4}, 0, 32}, second}; }

// The index is refused with a message containing `reason`.
void expect_refused(const std::vector<WeightEntry>& index, const std::string& reason) {
  try {
    check_weights_index(index, 8192);
    ADD_FAILURE() << "accepted an index that should fail with '" << reason << "'";
  } catch (const ManifestError& e) {
    EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
  }
}

TEST(WeightsIndex, AcceptsTensorsInFileOrderWithinTheFile) {
  EXPECT_NO_THROW(check_weights_index(index_with({"b", "uint8", {16}, 4096, 16}), 8192));
  EXPECT_NO_THROW(check_weights_index(index_with({"b", "float16", {2, 1024}, 4096, 4096}), 8192));
  EXPECT_NO_THROW(check_weights_index({}, 8192));
}

TEST(WeightsIndex, RefusesWhatCannotBeMappedSafely) {
  expect_refused(index_with({"b", "complex64", {2}, 4096, 16}), "has dtype 'complex64'");
  expect_refused(index_with({"b", "uint8", {16}, 4096, 15}), "does not fill its 15 bytes");
  expect_refused(index_with({"b", "uint8", {16}, 8184, 16}), "lies beyond the end");
  expect_refused(index_with({"b", "uint8", {16}, UINT64_MAX - 4, 16}), "lies beyond the end");  // no wrap-around
  expect_refused(index_with({"b", "uint8", {16}, 16, 16}), "overlaps the tensor before it");
  expect_refused(index_with({"a", "uint8", {16}, 4096, 16}), "is listed twice");
  expect_refused(index_with({"b", "uint8", {-16}, 4096, 16}), "negative dimension");
  expect_refused(index_with({"b", "float32", {INT64_MAX, INT64_MAX}, 4096, 16}), "more elements than can be counted");
}

}  // namespace
}  // namespace gpt2_onnx
