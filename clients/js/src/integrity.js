// Files are read through a Source (a folder in Node, a base URL in the browser) and checked against the manifest
// (size, then sha256) before anything uses them.
import { ChangedFileError, MissingFileError, NotAnExportError } from './errors.js';
import { MANIFEST_FILE, parseManifest } from './manifest.js';

/**
 * Where an export's files come from.
 * @typedef {{
 *   where: string,
 *   read: (name: string) => Promise<Uint8Array | null>,
 * }} Source
 * `read` resolves null when the file does not exist (a 404 over HTTP), and rejects on other failures.
 *
 * @typedef {(bytes: Uint8Array) => Promise<string>} Sha256  hex digest of the bytes
 */

/**
 * Read and parse the source's manifest.json (the one file no manifest lists).
 * @param {Source} source @returns {Promise<import('./manifest.js').Manifest>}
 */
export async function readManifest(source) {
  const bytes = await source.read(MANIFEST_FILE);
  if (bytes === null) throw new NotAnExportError(`${source.where}: no ${MANIFEST_FILE}; this is not a gpt2-onnx export folder`);
  return parseManifest(new TextDecoder().decode(bytes), source.where);
}

/**
 * Read one file the manifest lists and check its size and sha256.
 * @param {Source} source
 * @param {import('./manifest.js').Manifest} manifest
 * @param {string} name
 * @param {Sha256} sha256
 * @returns {Promise<Uint8Array>}
 */
export async function readChecked(source, manifest, name, sha256) {
  const record = manifest.files[name];
  if (!record) throw new MissingFileError(`${source.where}: the manifest lists no ${name}`);
  const bytes = await source.read(name);
  if (bytes === null) {
    throw new MissingFileError(`${source.where}: ${name} is missing (the manifest lists it; copy the whole export folder)`);
  }
  if (bytes.byteLength !== record.size) {
    throw new ChangedFileError(
      `${source.where}: ${name} has ${bytes.byteLength} bytes, the manifest states ${record.size}: the file was changed or truncated`,
    );
  }
  const digest = await sha256(bytes);
  if (digest !== record.sha256) {
    throw new ChangedFileError(`${source.where}: ${name} has sha256 ${digest}, the manifest states ${record.sha256}: the file was changed`);
  }
  return bytes;
}

/**
 * Read and check several files at once.
 * @param {Source} source @param {import('./manifest.js').Manifest} manifest @param {string[]} names @param {Sha256} sha256
 * @returns {Promise<Map<string, Uint8Array>>}
 */
export async function readAllChecked(source, manifest, names, sha256) {
  const entries = await Promise.all(names.map(async (name) => /** @type {[string, Uint8Array]} */ ([name, await readChecked(source, manifest, name, sha256)])));
  return new Map(entries);
}
