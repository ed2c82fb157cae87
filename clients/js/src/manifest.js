// manifest.json: the export's I/O contract and inventory (docs/deploying.md). Pure parsing, no I/O.
import { ManifestError, NotAnExportError } from './errors.js';

export const MANIFEST_FILE = 'manifest.json';
const FORMAT = 'gpt2-onnx';
const SCHEMA_VERSION = 1;
const TOKEN_INPUTS = ['input_ids', 'attention_mask', 'position_ids'];

/**
 * @typedef {{name: string, dtype: string, dims: (string|number)[]}} TensorSpec
 * @typedef {{file: string, inputs: TensorSpec[], outputs: TensorSpec[]}} GraphRecord
 * @typedef {{size: number, sha256: string}} FileRecord
 * @typedef {{
 *   nLayer: number, nHead: number, headDim: number, vocabSize: number, nPositions: number,
 *   precision: string, eosTokenId: number | null,
 *   prefill: GraphRecord, decode: GraphRecord, weightsFile: string,
 *   files: Record<string, FileRecord>,
 *   cachePairs: {past: string, present: string}[],
 *   raw: Record<string, any>,
 * }} Manifest
 */

/**
 * Parse and check a manifest's JSON text.
 * @param {string} text
 * @param {string} where  the folder or URL, for messages
 * @returns {Manifest}
 */
export function parseManifest(text, where) {
  /** @type {any} */
  let json;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new NotAnExportError(`${where}: ${MANIFEST_FILE} is not JSON (${/** @type {Error} */ (error).message})`);
  }
  if (!json || typeof json !== 'object' || json.format !== FORMAT) {
    throw new NotAnExportError(`${where}: ${MANIFEST_FILE} is not a gpt2-onnx manifest (format is not "${FORMAT}")`);
  }
  if (json.schema_version !== SCHEMA_VERSION) {
    throw new ManifestError(`${where}: manifest schema_version ${json.schema_version}; this package reads ${SCHEMA_VERSION}`);
  }
  const model = objectField(json, 'model', where);
  const prefill = graphRecord(json, 'prefill', where);
  const decode = graphRecord(json, 'decode', where);
  const files = objectField(json, 'files', where);
  for (const [name, record] of Object.entries(files)) {
    plainFileName(name, where);
    if (!Number.isInteger(record?.size) || typeof record?.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(record.sha256)) {
      throw new ManifestError(`${where}: manifest entry for ${name} lacks an integer size and a sha256`);
    }
  }
  const weightsFile = plainFileName(json.weights_file, where);
  for (const name of [prefill.file, decode.file, weightsFile]) {
    if (!(name in files)) throw new ManifestError(`${where}: the manifest lists no size and sha256 for ${name}`);
  }
  const eos = json.tokens?.eos_token_id;
  return {
    nLayer: positiveInt(model, 'n_layer', where),
    nHead: positiveInt(model, 'n_head', where),
    headDim: positiveInt(model, 'head_dim', where),
    vocabSize: positiveInt(model, 'vocab_size', where),
    nPositions: positiveInt(model, 'n_positions', where),
    precision: String(json.precision ?? 'float32'),
    eosTokenId: Number.isInteger(eos) ? eos : null,
    prefill,
    decode,
    weightsFile,
    files,
    cachePairs: cachePairs(decode, prefill, where),
    raw: json,
  };
}

/**
 * @param {any} json @param {'prefill'|'decode'} kind @param {string} where
 * @returns {GraphRecord}
 */
function graphRecord(json, kind, where) {
  const record = json.graphs?.[kind];
  if (!record || !Array.isArray(record.inputs) || !Array.isArray(record.outputs)) {
    throw new ManifestError(`${where}: the manifest describes no ${kind} graph`);
  }
  const names = record.inputs.map((/** @type {TensorSpec} */ spec) => spec.name);
  for (const name of TOKEN_INPUTS) {
    if (!names.includes(name)) throw new ManifestError(`${where}: the ${kind} graph has no input ${name}`);
  }
  if (!record.outputs.some((/** @type {TensorSpec} */ spec) => spec.name === 'logits')) {
    throw new ManifestError(`${where}: the ${kind} graph has no output logits`);
  }
  return { file: plainFileName(record.file, where), inputs: record.inputs, outputs: record.outputs };
}

/**
 * Each decode input past_key_values.{i}.{key|value} paired with the present.{i}.{key|value} output that feeds it
 * next step; prefill must produce the same present names.
 * @param {GraphRecord} decode @param {GraphRecord} prefill @param {string} where
 */
function cachePairs(decode, prefill, where) {
  const pairs = decode.inputs
    .filter((spec) => spec.name.startsWith('past_key_values.'))
    .map((spec) => ({ past: spec.name, present: spec.name.replace(/^past_key_values\./, 'present.') }));
  const decodeOut = new Set(decode.outputs.map((spec) => spec.name));
  const prefillOut = new Set(prefill.outputs.map((spec) => spec.name));
  for (const { present } of pairs) {
    if (!decodeOut.has(present) || !prefillOut.has(present)) {
      throw new ManifestError(`${where}: ${present} is not an output of both graphs`);
    }
  }
  if (pairs.length === 0) throw new ManifestError(`${where}: the decode graph takes no past_key_values`);
  return pairs;
}

/** @param {any} json @param {string} key @param {string} where @returns {Record<string, any>} */
function objectField(json, key, where) {
  const value = json[key];
  if (!value || typeof value !== 'object') throw new ManifestError(`${where}: the manifest has no "${key}" object`);
  return value;
}

/** @param {Record<string, any>} model @param {string} key @param {string} where @returns {number} */
function positiveInt(model, key, where) {
  const value = model[key];
  if (!Number.isInteger(value) || value <= 0) throw new ManifestError(`${where}: manifest model.${key} is not a positive integer`);
  return value;
}

/** A file name inside the folder, never a path (../x, /x, a/b). @param {unknown} name @param {string} where */
export function plainFileName(name, where) {
  if (typeof name !== 'string' || !name || name === '.' || name === '..' || /[/\\\0]/.test(name)) {
    throw new ManifestError(`${where}: manifest names "${String(name)}", which is not a plain file name in the folder`);
  }
  return name;
}
