#include "sha256.hpp"

#include <openssl/evp.h>

#include <fstream>
#include <stdexcept>
#include <vector>

#include "gpt2_onnx/errors.hpp"

namespace gpt2_onnx::detail {

Sha256::Sha256() : context_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
  if (!context_ || EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("OpenSSL could not start a SHA-256 digest");
  }
}

void Sha256::update(const void* data, size_t size) {
  if (EVP_DigestUpdate(context_.get(), data, size) != 1) throw std::runtime_error("OpenSSL's SHA-256 update failed");
}

std::string Sha256::hex_digest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(context_.get(), digest, &length) != 1) {
    throw std::runtime_error("OpenSSL's SHA-256 could not finish");
  }
  static const char* const hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

std::string sha256_of_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw MissingFileError("cannot open " + path.string());
  Sha256 hash;
  std::vector<char> chunk(1 << 20);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    hash.update(chunk.data(), static_cast<size_t>(in.gcount()));
  }
  return hash.hex_digest();
}

}  // namespace gpt2_onnx::detail
