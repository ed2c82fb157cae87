// The text layer over onnxruntime-genai's tokenizer C API (ort_genai_c.h): OgaCreateTokenizerFromPath reads the
// export folder's genai_config.json, tokenizer.json and tokenizer_config.json; OgaTokenizerStream decodes one token
// at a time. Built where GPT2_ONNX_TEXT finds the library and its headers.
#include <ort_genai_c.h>

#include <climits>
#include <mutex>

#include "gpt2_onnx/errors.hpp"
#include "gpt2_onnx/tokenizer.hpp"
#include "utf8.hpp"

namespace gpt2_onnx {
namespace {

// onnxruntime-genai keeps process-wide state (its ONNX Runtime environment) that must be torn down with
// OgaShutdown() before the process exits, after every object of it is gone: count the live tokenizers and shut it
// down when the last one goes (a later tokenizer initialises it again).
std::mutex genai_mutex;
int genai_users = 0;

void acquire_genai() {
  std::lock_guard<std::mutex> lock(genai_mutex);
  ++genai_users;
}

void release_genai() {
  std::lock_guard<std::mutex> lock(genai_mutex);
  if (--genai_users == 0) OgaShutdown();
}

// Throws TokenizerError with onnxruntime-genai's message where `result` reports a failure.
void check(OgaResult* result, const std::string& what) {
  if (result == nullptr) return;
  const std::string message = OgaResultGetError(result);
  OgaDestroyResult(result);
  throw TokenizerError(what + ": " + message);
}

std::vector<int32_t> narrow_ids(const std::vector<int64_t>& ids) {
  std::vector<int32_t> narrow;
  narrow.reserve(ids.size());
  for (const int64_t id : ids) {
    if (id < 0 || id > INT32_MAX) throw TokenizerError("token id " + std::to_string(id) + " cannot be decoded");
    narrow.push_back(static_cast<int32_t>(id));
  }
  return narrow;
}

}  // namespace

bool text_available() { return true; }
const char* text_unavailable_reason() { return ""; }

struct Tokenizer::Impl {
  OgaTokenizer* handle = nullptr;
  ~Impl() {
    if (handle != nullptr) OgaDestroyTokenizer(handle);
    release_genai();
  }
};

struct TextStream::State {
  OgaTokenizerStream* handle = nullptr;
  ~State() {
    if (handle != nullptr) OgaDestroyTokenizerStream(handle);
  }
};

Tokenizer Tokenizer::open(const std::filesystem::path& folder) {
  acquire_genai();
  auto impl = std::make_unique<Impl>();  // from here on, its destructor releases
  check(OgaCreateTokenizerFromPath(folder.c_str(), &impl->handle),
        folder.string() + ": onnxruntime-genai cannot read the tokenizer files");
  return Tokenizer(std::move(impl));
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::vector<int64_t> Tokenizer::encode(std::string_view text) const {
  if (text.find('\0') != std::string_view::npos) throw TokenizerError("the text contains a NUL character");
  OgaSequences* raw = nullptr;
  check(OgaCreateSequences(&raw), "cannot create a sequence");
  std::unique_ptr<OgaSequences, void (*)(OgaSequences*)> sequences(raw, OgaDestroySequences);
  check(OgaTokenizerEncode(impl_->handle, std::string(text).c_str(), sequences.get()), "cannot encode the text");
  const size_t count = OgaSequencesGetSequenceCount(sequences.get(), 0);
  const int32_t* data = OgaSequencesGetSequenceData(sequences.get(), 0);
  return std::vector<int64_t>(data, data + count);
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  const std::vector<int32_t> narrow = narrow_ids(ids);
  const char* out = nullptr;
  check(OgaTokenizerDecode(impl_->handle, narrow.data(), narrow.size(), &out), "cannot decode the ids");
  std::string text = out != nullptr ? out : "";
  OgaDestroyString(out);
  return text;
}

TextStream Tokenizer::stream() const { return TextStream(*this); }

TextStream::TextStream(const Tokenizer& tokenizer) : tokenizer_(&tokenizer), state_(std::make_unique<State>()) {
  check(OgaCreateTokenizerStream(tokenizer.impl_->handle, &state_->handle), "cannot create a decoding stream");
}

TextStream::TextStream(TextStream&&) noexcept = default;
TextStream& TextStream::operator=(TextStream&&) noexcept = default;
TextStream::~TextStream() = default;

std::string TextStream::push(int64_t id) {
  const int32_t narrow = narrow_ids({id})[0];
  const char* out = nullptr;
  check(OgaTokenizerStreamDecode(state_->handle, narrow, &out), "cannot decode token " + std::to_string(id));
  ids_.push_back(id);
  // The stream already holds back unfinished characters; the cut below makes sure of it.
  std::string piece = pending_ + (out != nullptr ? out : "");
  const size_t cut = detail::complete_utf8_prefix(piece);
  pending_ = piece.substr(cut);
  piece.resize(cut);
  emitted_ += piece;
  return piece;
}

std::string TextStream::finish() {
  const std::string full = tokenizer_->decode(ids_);
  if (full.compare(0, emitted_.size(), emitted_) != 0) {
    throw TokenizerError("the streamed text is not a prefix of the decoded text");
  }
  std::string rest = full.substr(emitted_.size());
  emitted_ = full;
  pending_.clear();
  return rest;
}

}  // namespace gpt2_onnx
