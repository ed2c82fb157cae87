// The text layer of a build without onnxruntime-genai (GPT2_ONNX_TEXT=OFF, or AUTO where it was not found): every
// text entry point throws TextUnavailableError naming the reason; token ids work the same.
#include "gpt2_onnx/errors.hpp"
#include "gpt2_onnx/tokenizer.hpp"

namespace gpt2_onnx {
namespace {

[[noreturn]] void unavailable() {
  throw TextUnavailableError(std::string("this gpt2_onnx was built without the text layer: ") +
                             text_unavailable_reason());
}

}  // namespace

bool text_available() { return false; }
const char* text_unavailable_reason() { return GPT2_ONNX_TEXT_REASON; }

struct Tokenizer::Impl {};
struct TextStream::State {};

Tokenizer Tokenizer::open(const std::filesystem::path&) { unavailable(); }
Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;
std::vector<int64_t> Tokenizer::encode(std::string_view) const { unavailable(); }
std::string Tokenizer::decode(const std::vector<int64_t>&) const { unavailable(); }
TextStream Tokenizer::stream() const { unavailable(); }

TextStream::TextStream(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}
TextStream::TextStream(TextStream&&) noexcept = default;
TextStream& TextStream::operator=(TextStream&&) noexcept = default;
TextStream::~TextStream() = default;
std::string TextStream::push(int64_t) { unavailable(); }
std::string TextStream::finish() { unavailable(); }

}  // namespace gpt2_onnx
