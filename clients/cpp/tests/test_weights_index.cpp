// Unit tests of check_weights_index (export_files.hpp): what the sample refuses before it maps a single byte.
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "export_files.hpp"

namespace {

int failures = 0;
int checks = 0;

std::vector<gpt2::WeightEntry> index_with(const gpt2::WeightEntry& second) {
  return {{"a", "float32", {2, 4}, 0, 32}, second};
}

void expect_accepts(const std::vector<gpt2::WeightEntry>& index, const std::string& what) {
  ++checks;
  try {
    gpt2::check_weights_index(index, 8192);
  } catch (const gpt2::ExportFolderError& e) {
    ++failures;
    std::cerr << "FAIL " << what << ": refused (" << e.what() << ")\n";
  }
}

void expect_refuses(const std::vector<gpt2::WeightEntry>& index, const std::string& reason) {
  ++checks;
  try {
    gpt2::check_weights_index(index, 8192);
  } catch (const gpt2::ExportFolderError& e) {
    if (std::string(e.what()).find(reason) != std::string::npos) return;
    ++failures;
    std::cerr << "FAIL refused for another reason than '" << reason << "': " << e.what() << "\n";
    return;
  }
  ++failures;
  std::cerr << "FAIL accepted an index that should fail with '" << reason << "'\n";
}

}  // namespace

int main() {
  expect_accepts(index_with({"b", "uint8", {16}, 4096, 16}), "two tensors in file order");
  expect_accepts(index_with({"b", "float16", {2, 1024}, 4096, 4096}), "a tensor ending at the end of the file");
  expect_accepts({}, "an empty index");
  expect_refuses(index_with({"b", "complex64", {2}, 4096, 16}), "has dtype 'complex64'");
  expect_refuses(index_with({"b", "uint8", {16}, 4096, 15}), "does not fill its 15 bytes");
  expect_refuses(index_with({"b", "uint8", {16}, 8184, 16}), "lies beyond the end");
  expect_refuses(index_with({"b", "uint8", {16}, UINT64_MAX - 4, 16}), "lies beyond the end");  // no wrap-around
  expect_refuses(index_with({"b", "uint8", {16}, 16, 16}), "overlaps the tensor before it");
  expect_refuses(index_with({"a", "uint8", {16}, 4096, 16}), "is listed twice");
  expect_refuses(index_with({"b", "uint8", {-16}, 4096, 16}), "negative dimension");
  expect_refuses(index_with({"b", "float32", {INT64_MAX, INT64_MAX}, 4096, 16}), "more elements than can be counted");
  std::cout << "weights_index: " << checks - failures << " of " << checks << " checks ok\n";
  return failures == 0 ? 0 : 1;
}
