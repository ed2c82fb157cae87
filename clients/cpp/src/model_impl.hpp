// What a Model holds, shared by model.cpp and generator.cpp. Internal.
#pragma once

#include <onnxruntime_cxx_api.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <utility>

#include "gpt2_onnx/errors.hpp"
#include "gpt2_onnx/model.hpp"
#include "gpt2_onnx/tokenizer.hpp"
#include "sessions.hpp"

namespace gpt2_onnx {

struct Model::Impl {
  std::filesystem::path folder;
  Manifest manifest;
  Ort::Env env{nullptr};  // before the sessions, which must go first
  std::unique_ptr<detail::ExportSessions> sessions;
  std::optional<Tokenizer> tokenizer;
};

namespace detail {

// Runs `call`, turning ONNX Runtime's exceptions into RuntimeError.
template <typename Call>
auto onnxruntime_call(Call&& call) -> decltype(call()) {
  try {
    return call();
  } catch (const Ort::Exception& e) {
    throw RuntimeError(std::string("ONNX Runtime: ") + e.what());
  }
}

// Refuses (OptionsError, PromptTooLongError) prompts that cannot run with max_new_tokens new tokens: none, an empty
// one, an id outside the vocabulary, or the longest plus max_new_tokens beyond n_positions.
void check_prompts(const Manifest& manifest, const std::vector<std::vector<int64_t>>& prompts, int max_new_tokens);

}  // namespace detail
}  // namespace gpt2_onnx
