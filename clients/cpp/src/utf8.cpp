#include "utf8.hpp"

namespace gpt2_onnx::detail {
namespace {

// Bytes in the character a lead byte starts; 0 for a continuation byte or one that starts nothing.
size_t sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 0;
}

}  // namespace

size_t complete_utf8_prefix(std::string_view bytes) {
  const size_t size = bytes.size();
  // Look back over at most 3 continuation bytes for the lead byte of the last character.
  for (size_t back = 1; back <= 4 && back <= size; ++back) {
    const auto byte = static_cast<unsigned char>(bytes[size - back]);
    if ((byte & 0xC0) == 0x80) continue;  // a continuation byte: the lead is further back
    const size_t needed = sequence_length(byte);
    return needed > back ? size - back : size;  // unfinished: cut before its lead byte
  }
  return size;  // only continuation bytes at the end: nothing that could still complete
}

}  // namespace gpt2_onnx::detail
