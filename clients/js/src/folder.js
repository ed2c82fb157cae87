// Export folders on disk (Node): a Source over a folder, checked to be one, and sha256 from node:crypto. No ONNX
// Runtime here, so the command line reads a folder's manifest without loading onnxruntime-node.
import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { NotAnExportError } from './errors.js';
import { readManifest } from './integrity.js';

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

/**
 * A Source over `folder` once it is known to be a folder: a missing path and a file are NotAnExportErrors, where
 * reading manifest.json inside them would fail with ENOENT or ENOTDIR.
 * @param {string} folder @returns {Promise<import('./integrity.js').Source>}
 */
export async function checkedFolderSource(folder) {
  const info = await stat(folder).catch((error) => {
    if (['ENOENT', 'ENOTDIR'].includes(/** @type {NodeJS.ErrnoException} */ (error).code ?? '')) return null;
    throw error;
  });
  if (info === null) throw new NotAnExportError(`${folder}: no such folder`);
  if (!info.isDirectory()) throw new NotAnExportError(`${folder} is a file, not an export folder`);
  return folderSource(folder);
}

/**
 * The manifest of the export in `folder`, checked as loadExport checks it (the files it lists are not read).
 * @param {string} folder @returns {Promise<import('./manifest.js').Manifest>}
 */
export async function readExportManifest(folder) {
  return readManifest(await checkedFolderSource(folder));
}

/** @param {Uint8Array} bytes */
export async function sha256Node(bytes) {
  return createHash('sha256').update(bytes).digest('hex');
}
