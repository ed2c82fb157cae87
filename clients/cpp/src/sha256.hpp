// SHA-256 (FIPS 180-4), to check an export's files against the digests manifest.json states. Internal.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace gpt2_onnx::detail {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  std::string hex_digest();  // 64 lower-case hex digits; the object is spent afterwards

 private:
  void compress(const uint8_t* block);  // one 64-byte block into state_
  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

// The file's digest, read in 1 MiB chunks. Throws MissingFileError where it cannot be opened.
std::string sha256_of_file(const std::filesystem::path& path);

}  // namespace gpt2_onnx::detail
