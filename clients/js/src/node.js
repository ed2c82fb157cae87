// Node: onnxruntime-node, files from a folder, sha256 from node:crypto.
import * as ort from 'onnxruntime-node';
import { checkedFolderSource, sha256Node } from './folder.js';
import { Gpt2Model } from './model.js';

export * from './index.js';
export { folderSource, checkedFolderSource, readExportManifest, sha256Node } from './folder.js';

/** ONNX Runtime's session config entries that say whether a session's threads spin when a run returns. */
export const SPINNING_ENTRIES = ['session.force_spinning_stop', 'session.intra_op.allow_spinning'];

/**
 * The options each of the model's two sessions gets: the application's, and, unless it sets either spinning entry
 * itself, `session.force_spinning_stop` 1. The prefill and decode sessions share the cores, and a session whose
 * threads spin on after its run takes them from the other's next run (the Python runtime, the C++ and the C#
 * samples set the same; docs/generation.md, "Two sessions never spin against each other").
 * @param {import('onnxruntime-common').InferenceSession.SessionOptions} [sessionOptions]
 * @returns {import('onnxruntime-common').InferenceSession.SessionOptions}
 */
export function nodeSessionOptions(sessionOptions = {}) {
  const extra = /** @type {Record<string, unknown>} */ (sessionOptions.extra ?? {});
  if (SPINNING_ENTRIES.some((key) => hasEntry(extra, key))) return sessionOptions;
  return { ...sessionOptions, extra: { ...extra, 'session.force_spinning_stop': '1' } };
}

/**
 * Whether `extra` sets config entry `key` ('a.b.c'), flat ({'a.b.c': v}) or nested ({a: {b: {c: v}}}): onnxruntime-node
 * joins nested keys with dots.
 * @param {Record<string, unknown>} extra @param {string} key
 */
function hasEntry(extra, key) {
  if (key in extra) return true;
  /** @type {unknown} */
  let node = extra;
  for (const part of key.split('.')) {
    if (node === null || typeof node !== 'object') return false;
    node = /** @type {Record<string, unknown>} */ (node)[part];
  }
  return node !== undefined;
}

/**
 * Load an export folder with onnxruntime-node (a missing folder or a file is a NotAnExportError); every file the manifest lists is checked unless checkAllFiles is false.
 * Both sessions stop their threads spinning when a run returns unless sessionOptions.extra says otherwise
 * (nodeSessionOptions).
 * @param {string} folder
 * @param {{sessionOptions?: import('onnxruntime-common').InferenceSession.SessionOptions, checkAllFiles?: boolean}} [options]
 */
export async function loadExport(folder, options = {}) {
  const sessionOptions = nodeSessionOptions(options.sessionOptions);
  return Gpt2Model.load(await checkedFolderSource(folder), { ort, sha256: sha256Node, checkAllFiles: true, ...options, sessionOptions });
}
