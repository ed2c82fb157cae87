// Node: onnxruntime-node, files from a folder, sha256 from node:crypto.
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { Gpt2Model } from './model.js';

export * from './index.js';

/**
 * A Source over a local folder.
 * @param {string} folder @returns {import('./integrity.js').Source}
 */
export function folderSource(folder) {
  return {
    where: folder,
    async read(name) {
      try {
        return new Uint8Array(await readFile(path.join(folder, name)));
      } catch (error) {
        if (/** @type {NodeJS.ErrnoException} */ (error).code === 'ENOENT') return null;
        throw error;
      }
    },
  };
}

/** @param {Uint8Array} bytes */
export async function sha256Node(bytes) {
  return createHash('sha256').update(bytes).digest('hex');
}

/**
 * Load an export folder with onnxruntime-node; every file the manifest lists is checked unless checkAllFiles is false.
 * @param {string} folder
 * @param {{sessionOptions?: import('onnxruntime-common').InferenceSession.SessionOptions, checkAllFiles?: boolean}} [options]
 */
export function loadExport(folder, options = {}) {
  return Gpt2Model.load(folderSource(folder), { ort, sha256: sha256Node, checkAllFiles: true, ...options });
}
