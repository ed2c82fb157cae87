// SHA-256 through OpenSSL's libcrypto (EVP), to check an export's files against the digests manifest.json states.
// Internal.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX, kept out of this header

namespace gpt2_onnx::detail {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  std::string hex_digest();  // 64 lower-case hex digits; the object is spent afterwards

 private:
  std::unique_ptr<evp_md_ctx_st, void (*)(evp_md_ctx_st*)> context_;
};

// The file's digest, read in 1 MiB chunks. Throws MissingFileError where it cannot be opened.
std::string sha256_of_file(const std::filesystem::path& path);

}  // namespace gpt2_onnx::detail
