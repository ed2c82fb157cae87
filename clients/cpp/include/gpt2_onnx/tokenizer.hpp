// Text in, text out: the export folder's own tokenizer files read by onnxruntime-genai's tokenizer C API
// (OgaCreateTokenizerFromPath reads genai_config.json, tokenizer.json and tokenizer_config.json), no hand-written BPE.
//
// Where the library was built without the text layer (text_available() false), Tokenizer::open throws
// TextUnavailableError; everything on token ids works the same.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gpt2_onnx {

// True where this build has the text layer (onnxruntime-genai); see GPT2_ONNX_WITH_TEXT in gpt2_onnx/config.hpp.
bool text_available();
// Why text is unavailable in this build ("" where it is available).
const char* text_unavailable_reason();

class TextStream;

class Tokenizer {
 public:
  // Reads the folder's tokenizer files. Throws TextUnavailableError or TokenizerError. The caller checks the files
  // against the manifest first (Model::open does).
  static Tokenizer open(const std::filesystem::path& folder);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // GPT-2's byte-level BPE, no tokens added; "<|endoftext|>" in the text is the special token, as in transformers.
  std::vector<int64_t> encode(std::string_view text) const;
  // The text of ids, special tokens skipped. A sequence ending inside a UTF-8 character ends in U+FFFD.
  std::string decode(const std::vector<int64_t>& ids) const;
  // An incremental decoder for one sequence; the tokenizer must outlive it.
  TextStream stream() const;

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  friend class TextStream;
};

// The text each new token adds, never part of a UTF-8 character: bytes of an unfinished character are held back
// until it completes. push() pieces followed by finish() add up to Tokenizer::decode(all ids) exactly.
class TextStream {
 public:
  TextStream(TextStream&&) noexcept;
  TextStream& operator=(TextStream&&) noexcept;
  ~TextStream();

  std::string push(int64_t id);  // the new text, possibly ""
  // The rest of the text: what decode(all ids) has beyond the pieces so far (an unfinished character at the very
  // end, as U+FFFD). Throws TokenizerError where the pieces are not a prefix of that text (never seen with GPT-2).
  std::string finish();
  const std::vector<int64_t>& ids() const { return ids_; }

 private:
  friend class Tokenizer;
  struct State;
  explicit TextStream(const Tokenizer& tokenizer);
  const Tokenizer* tokenizer_;
  std::unique_ptr<State> state_;
  std::vector<int64_t> ids_;
  std::string emitted_;  // every piece so far, concatenated
  std::string pending_;  // bytes of an unfinished character
};

}  // namespace gpt2_onnx
