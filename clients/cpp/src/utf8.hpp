// Where a byte string may be cut without splitting a UTF-8 character. Internal.
#pragma once

#include <cstddef>
#include <string_view>

namespace gpt2_onnx::detail {

// The length of the longest prefix of `bytes` that does not end inside an unfinished multi-byte character: the
// bytes after it are the start of a character still missing its continuation bytes (at most 3). Bytes that can
// never become valid UTF-8 (a stray continuation byte, 0xF8..0xFF) do not hold anything back.
size_t complete_utf8_prefix(std::string_view bytes);

}  // namespace gpt2_onnx::detail
