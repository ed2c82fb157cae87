// The contract's token inputs and logits output (gpt2_onnx/names.py in the Python package); the KV cache's names
// come from the manifest. Internal.
#pragma once

#include <string>

namespace gpt2_onnx::detail {

inline constexpr const char* kInputIds = "input_ids";
inline constexpr const char* kAttentionMask = "attention_mask";
inline constexpr const char* kPositionIds = "position_ids";
inline constexpr const char* kLogits = "logits";

inline bool is_token_input(const std::string& name) {
  return name == kInputIds || name == kAttentionMask || name == kPositionIds;
}

}  // namespace gpt2_onnx::detail
