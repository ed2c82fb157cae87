// Typed errors: every failure a caller can act on has its own class; the CLI alone turns them into messages.

/** The base of every error this package raises on purpose. */
export class Gpt2OnnxError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = new.target.name;
  }
}

/** The folder (or URL) holds no gpt2-onnx export: no manifest.json, or a manifest of another format. */
export class NotAnExportError extends Gpt2OnnxError {}

/** manifest.json is malformed or states something this package cannot run. */
export class ManifestError extends Gpt2OnnxError {}

/** A file the manifest lists is absent. */
export class MissingFileError extends Gpt2OnnxError {}

/** A file's size or sha256 differs from what the manifest states. */
export class ChangedFileError extends Gpt2OnnxError {}

/** The prompt (plus the tokens asked for) does not fit the model's context. */
export class PromptTooLongError extends Gpt2OnnxError {}

/** Generation options out of range (temperature, top-k, top-p, max new tokens, seed). */
export class OptionsError extends Gpt2OnnxError {}
