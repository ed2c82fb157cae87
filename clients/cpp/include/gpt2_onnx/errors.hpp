// The exceptions gpt2_onnx throws on purpose: one class per failure a caller can act on, all derived from Error.
// Programs turn them into one-line messages and exit statuses; the library never prints.
#pragma once

#include <stdexcept>

namespace gpt2_onnx {

// The base of every error this library raises on purpose.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The folder holds no gpt2-onnx export: no manifest.json, or a manifest of another format.
class NotAnExportError : public Error {
 public:
  using Error::Error;
};

// manifest.json is malformed, or states something this library cannot run (a newer schema, a bad weights index).
class ManifestError : public Error {
 public:
  using Error::Error;
};

// A file the manifest lists (or that the library needs) is absent from the folder.
class MissingFileError : public Error {
 public:
  using Error::Error;
};

// A file's size or sha256 differs from what the manifest states: changed or truncated.
class ChangedFileError : public Error {
 public:
  using Error::Error;
};

// The prompt plus the tokens asked for does not fit the model's context (n_positions).
class PromptTooLongError : public Error {
 public:
  using Error::Error;
};

// Generation or model options out of range: temperature, top-k, top-p, max new tokens, an empty prompt, a token id
// outside the vocabulary, an unknown provider name.
class OptionsError : public Error {
 public:
  using Error::Error;
};

// The requested execution provider cannot run here (never silently replaced by the CPU).
class ProviderError : public Error {
 public:
  using Error::Error;
};

// ONNX Runtime failed, or is older than the headers or the export need.
class RuntimeError : public Error {
 public:
  using Error::Error;
};

// The tokenizer library (onnxruntime-genai) failed to read the folder's tokenizer files, or to encode or decode.
class TokenizerError : public Error {
 public:
  using Error::Error;
};

// Text was asked of a build without the text layer (GPT2_ONNX_TEXT=OFF, or AUTO where onnxruntime-genai was absent).
class TextUnavailableError : public Error {
 public:
  using Error::Error;
};

}  // namespace gpt2_onnx
