// One export folder opened for generation: its manifest, both ONNX Runtime sessions (prefill and decode, KV cache
// kept inside ONNX Runtime between steps), and, where the build has the text layer, its tokenizer.
//
//   gpt2_onnx::Model model = gpt2_onnx::Model::open("export-folder");
//   gpt2_onnx::Generation g = model.generate("The os module");               // greedy, 16 new tokens
//   gpt2_onnx::GenerateOptions options;
//   options.max_new_tokens = 32;
//   model.generate("Hello", options, [](int64_t, std::string_view piece) { std::cout << piece; });  // streamed
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpt2_onnx/manifest.hpp"
#include "gpt2_onnx/options.hpp"

namespace gpt2_onnx {

class Tokenizer;
class Generator;

enum class FinishReason { eos, length };
const char* to_string(FinishReason reason);  // "eos", "length"

struct Generation {
  std::vector<int64_t> prompt_ids;
  std::vector<int64_t> ids;  // the new tokens only (end-of-text included where it ended the row)
  std::string text;          // the new tokens' text, special tokens skipped; "" without a tokenizer
  FinishReason finish_reason = FinishReason::length;
};

// Called once per new token with its id and the text it adds (possibly ""; always "" without a tokenizer), and
// once more at the end with id -1 and the rest of the text, where any is left (TextStream::finish).
using TokenCallback = std::function<void(int64_t id, std::string_view piece)>;

// What the sessions were given when the weights are shared (WeightLoading::shared_*).
struct SharedWeights {
  size_t tensors = 0;
  uint64_t bytes = 0;
};

class Model {
 public:
  // Reads and checks the manifest and the files it needs (ModelOptions::file_check), then creates both sessions and
  // the tokenizer. Throws NotAnExportError, ManifestError, MissingFileError, ChangedFileError, OptionsError,
  // ProviderError, RuntimeError, TokenizerError.
  static Model open(const std::filesystem::path& folder, const ModelOptions& options = {});

  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  const Manifest& manifest() const;
  const std::filesystem::path& folder() const;
  WeightLoading weight_loading() const;                // the way taken (ModelOptions::weights where it applies)
  std::optional<SharedWeights> shared_weights() const;  // nullopt: ONNX Runtime loaded the weights itself
  bool has_tokenizer() const;
  const Tokenizer& tokenizer() const;  // TextUnavailableError without one

  // Token ids in: one prompt, or a batch (left-padded, each row stopping on its own).
  Generation generate(const std::vector<int64_t>& prompt_ids, const GenerateOptions& options = {},
                      const TokenCallback& on_token = {});
  std::vector<Generation> generate(const std::vector<std::vector<int64_t>>& prompts,
                                   const GenerateOptions& options = {});
  // Text in (TextUnavailableError without a tokenizer).
  Generation generate(std::string_view prompt, const GenerateOptions& options = {},
                      const TokenCallback& on_token = {});
  std::vector<Generation> generate(const std::vector<std::string>& prompts, const GenerateOptions& options = {});

  // The next-token logits after a prompt (one prefill, no cache kept): (V,).
  std::vector<float> next_token_logits(const std::vector<int64_t>& prompt_ids);

  // The version string of the ONNX Runtime library this process loaded.
  static std::string onnxruntime_version();

  struct Impl;

 private:
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  friend class Generator;
};

}  // namespace gpt2_onnx
