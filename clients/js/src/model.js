// The runtime-agnostic core: loads an export through its manifest from a Source, then generates with prefill and
// a KV-cached decode loop. The ONNX Runtime module is injected, so onnxruntime-node and onnxruntime-web run the
// same code (src/node.js, src/web.js).
import { Tokenizer } from '@huggingface/tokenizers';
import { MissingFileError, OptionsError, PromptTooLongError } from './errors.js';
import { readAllChecked, readManifest } from './integrity.js';
import { tokenSelector } from './sampling.js';
import { TextStream } from './text_stream.js';

/**
 * @typedef {import('onnxruntime-common').Tensor} OrtTensor
 * @typedef {import('onnxruntime-common').InferenceSession} OrtSession
 * @typedef {{
 *   InferenceSession: {create(model: Uint8Array, options?: import('onnxruntime-common').InferenceSession.SessionOptions): Promise<OrtSession>},
 *   Tensor: typeof import('onnxruntime-common').Tensor,
 * }} OrtModule
 * @typedef {{
 *   ort: OrtModule, sha256: import('./integrity.js').Sha256,
 *   sessionOptions?: import('onnxruntime-common').InferenceSession.SessionOptions,
 *   checkAllFiles?: boolean,
 * }} LoadOptions
 * `checkAllFiles` also checks files generation does not read (golden.json, vocab.json, ...): the default in Node.
 * @typedef {import('./sampling.js').SamplingOptions & {maxNewTokens?: number, stopAtEos?: boolean}} GenerateOptions
 * @typedef {{id: number, text: string, index: number}} StreamedToken  `text`: what this token adds to the text
 * @typedef {{promptIds: number[], ids: number[], text: string, finishReason: 'eos' | 'length'}} Generation
 */

const TOKENIZER_FILES = ['tokenizer.json', 'tokenizer_config.json'];

export class Gpt2Model {
  /**
   * @param {import('./manifest.js').Manifest} manifest @param {Tokenizer} tokenizer
   * @param {OrtSession} prefill @param {OrtSession} decode @param {OrtModule} ort
   */
  constructor(manifest, tokenizer, prefill, decode, ort) {
    this.manifest = manifest;
    this.tokenizer = tokenizer;
    this.prefill = prefill;
    this.decode = decode;
    this.ort = ort;
  }

  /**
   * Read the manifest, check and read the files, create both sessions.
   * @param {import('./integrity.js').Source} source @param {LoadOptions} options
   */
  static async load(source, { ort, sha256, sessionOptions = {}, checkAllFiles = false }) {
    const manifest = await readManifest(source);
    for (const name of TOKENIZER_FILES) {
      if (!(name in manifest.files)) throw new MissingFileError(`${source.where}: the manifest lists no ${name}`);
    }
    const needed = [manifest.prefill.file, manifest.decode.file, manifest.weightsFile, ...TOKENIZER_FILES];
    const others = checkAllFiles ? Object.keys(manifest.files).filter((name) => !needed.includes(name)) : [];
    const files = await readAllChecked(source, manifest, [...needed, ...others], sha256);
    const json = (/** @type {string} */ name) => JSON.parse(new TextDecoder().decode(files.get(name)));
    const tokenizer = new Tokenizer(json('tokenizer.json'), json('tokenizer_config.json'));
    const weights = /** @type {Uint8Array} */ (files.get(manifest.weightsFile));
    // Both graphs name the one weights file as their external data; each session gets the same bytes.
    const options = { ...sessionOptions, externalData: [{ path: manifest.weightsFile, data: weights }] };
    const prefill = await ort.InferenceSession.create(/** @type {Uint8Array} */ (files.get(manifest.prefill.file)), options);
    const decode = await ort.InferenceSession.create(/** @type {Uint8Array} */ (files.get(manifest.decode.file)), options);
    return new Gpt2Model(manifest, tokenizer, prefill, decode, ort);
  }

  /** @param {string} text @returns {number[]} */
  encode(text) {
    return this.tokenizer.encode(text, { add_special_tokens: false }).ids;
  }

  /**
   * Stream the new tokens of one prompt (text or token ids).
   * @param {string | number[]} prompt @param {GenerateOptions} [options]
   * @returns {AsyncGenerator<StreamedToken, Generation>}  the return value is the whole generation
   */
  async *stream(prompt, options = {}) {
    const { maxNewTokens = 16, stopAtEos = true } = options;
    if (!(Number.isInteger(maxNewTokens) && maxNewTokens >= 1)) throw new OptionsError(`maxNewTokens must be an integer >= 1, not ${maxNewTokens}`);
    const select = tokenSelector(options);
    const promptIds = typeof prompt === 'string' ? this.encode(prompt) : [...prompt];
    this.checkPrompt(promptIds, maxNewTokens);
    const text = new TextStream(this.tokenizer);
    /** @type {number[]} */
    const ids = [];
    let out = await this.run(this.prefill, promptIds, promptIds.length, null);
    /** @type {'eos' | 'length'} */
    let finishReason = 'length';
    for (;;) {
      const id = select(lastLogits(out.logits));
      ids.push(id);
      yield { id, text: text.push(id), index: ids.length - 1 };
      if (stopAtEos && id === this.manifest.eosTokenId) {
        finishReason = 'eos';
        break;
      }
      if (ids.length === maxNewTokens) break;
      const past = out.past;
      out = await this.run(this.decode, [id], promptIds.length + ids.length, past);
      for (const tensor of Object.values(past)) tensor.dispose();
    }
    return { promptIds, ids, text: text.full(), finishReason };
  }

  /** Generate to the end and return everything. @param {string | number[]} prompt @param {GenerateOptions} [options] */
  async generate(prompt, options = {}) {
    const iterator = this.stream(prompt, options);
    for (;;) {
      const step = await iterator.next();
      if (step.done) return step.value;
    }
  }

  /**
   * The next-token logits after a prompt (one prefill call), e.g. to compare with an export's golden top-5.
   * @param {string | number[]} prompt @returns {Promise<Float32Array>}  (V,)
   */
  async nextTokenLogits(prompt) {
    const promptIds = typeof prompt === 'string' ? this.encode(prompt) : [...prompt];
    this.checkPrompt(promptIds, 1);
    const { logits, past } = await this.run(this.prefill, promptIds, promptIds.length, null);
    for (const tensor of Object.values(past)) tensor.dispose();
    return lastLogits(logits).slice();
  }

  /** @param {number[]} promptIds @param {number} maxNewTokens */
  checkPrompt(promptIds, maxNewTokens) {
    const { nPositions, vocabSize } = this.manifest;
    if (promptIds.length === 0) throw new OptionsError('the prompt is empty: GPT-2 needs at least one token');
    const bad = promptIds.find((id) => !(Number.isInteger(id) && id >= 0 && id < vocabSize));
    if (bad !== undefined) throw new OptionsError(`prompt token id ${bad} is outside the vocabulary (0..${vocabSize - 1})`);
    if (promptIds.length + maxNewTokens > nPositions) {
      throw new PromptTooLongError(
        `the prompt has ${promptIds.length} tokens; with ${maxNewTokens} new tokens that is ${promptIds.length + maxNewTokens}, more than the model's context of ${nPositions} positions`,
      );
    }
  }

  /**
   * One graph call for a batch of one. `total` = tokens in the sequence after this call (past + new).
   * @param {OrtSession} session @param {number[]} newIds @param {number} total @param {Record<string, OrtTensor> | null} past
   * @returns {Promise<{logits: OrtTensor, past: Record<string, OrtTensor>}>}
   */
  async run(session, newIds, total, past) {
    const { Tensor } = this.ort;
    const start = total - newIds.length;
    /** @type {Record<string, OrtTensor>} */
    const feeds = {
      input_ids: new Tensor('int64', BigInt64Array.from(newIds, BigInt), [1, newIds.length]), // (1, T)
      attention_mask: new Tensor('int64', new BigInt64Array(total).fill(1n), [1, total]), // (1, P + T)
      position_ids: new Tensor('int64', BigInt64Array.from(newIds, (_, i) => BigInt(start + i)), [1, newIds.length]), // (1, T)
    };
    if (past) {
      for (const { past: name, present } of this.manifest.cachePairs) feeds[name] = past[present]; // (1, nh, P, hs)
    }
    const results = await session.run(feeds);
    /** @type {Record<string, OrtTensor>} */
    const present = {};
    for (const { present: name } of this.manifest.cachePairs) present[name] = results[name]; // (1, nh, P + T, hs)
    return { logits: results.logits, past: present };
  }

  async release() {
    await this.prefill.release();
    await this.decode.release();
  }
}

/** The last position's logits of a (1, T, V) tensor. @param {OrtTensor} logits @returns {Float32Array} */
function lastLogits(logits) {
  const vocab = /** @type {number} */ (logits.dims[logits.dims.length - 1]);
  const data = /** @type {Float32Array} */ (logits.data);
  return data.subarray(data.length - vocab);
}

