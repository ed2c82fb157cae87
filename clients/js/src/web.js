// Browser: onnxruntime-web (WebAssembly), files over HTTP(S) with fetch, sha256 from WebCrypto.
import * as ort from 'onnxruntime-web';
import { Gpt2Model } from './model.js';

export * from './index.js';
export { ort };

/**
 * A Source over a base URL (the export folder served as static files). A 404 reads as a missing file.
 * @param {string} baseUrl @returns {import('./integrity.js').Source}
 */
export function urlSource(baseUrl) {
  const base = baseUrl.endsWith('/') ? baseUrl : `${baseUrl}/`;
  return {
    where: base,
    async read(name) {
      const response = await fetch(new URL(name, new URL(base, globalThis.location?.href)));
      if (response.status === 404) return null;
      if (!response.ok) throw new Error(`${base}${name}: HTTP ${response.status}`);
      return new Uint8Array(await response.arrayBuffer());
    },
  };
}

/** @param {Uint8Array} bytes */
export async function sha256Web(bytes) {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', /** @type {Uint8Array<ArrayBuffer>} */ (bytes)));
  return Array.from(digest, (byte) => byte.toString(16).padStart(2, '0')).join('');
}

/**
 * Load an export served at baseUrl with onnxruntime-web's WebAssembly backend. Only the files generation reads are
 * downloaded and checked unless checkAllFiles is true.
 * @param {string} baseUrl
 * @param {{sessionOptions?: import('onnxruntime-common').InferenceSession.SessionOptions, checkAllFiles?: boolean}} [options]
 */
export function loadExport(baseUrl, options = {}) {
  return Gpt2Model.load(urlSource(baseUrl), {
    ort,
    sha256: sha256Web,
    ...options,
    sessionOptions: { executionProviders: ['wasm'], ...options.sessionOptions },
  });
}
