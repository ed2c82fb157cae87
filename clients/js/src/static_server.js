// A small static file server for `gpt2-onnx-js serve-page`, the browser test and the benchmark: GET/HEAD only, paths
// confined to the mounted folders, cross-origin isolated (so onnxruntime-web may use WebAssembly threads).
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';

/** @type {Record<string, string>} */
const TYPES = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.mjs': 'text/javascript', '.json': 'application/json',
  '.wasm': 'application/wasm', '.txt': 'text/plain; charset=utf-8', '.onnx': 'application/octet-stream', '.png': 'image/png',
};

/**
 * @typedef {{url: string, close: () => Promise<void>, bytesSent: () => number}} StaticServer
 * @typedef {{host?: string, port?: number, lifetimeMs?: number}} ServerOptions
 * `port` 0 (the default) takes a free one; `lifetimeMs` closes the server by itself after that long (none by default).
 */

/**
 * Serve `mounts` (URL prefix ending in '/' -> folder), e.g. {'/web/': pageFolder, '/export/': exportFolder}.
 * Rejects with the system error (EADDRINUSE, EACCES, ...) when it cannot listen.
 * @param {Record<string, string>} mounts @param {ServerOptions} [options]
 * @returns {Promise<StaticServer>}
 */
export async function startStaticServer(mounts, { host = '127.0.0.1', port = 0, lifetimeMs } = {}) {
  const prefixes = Object.keys(mounts).sort((a, b) => b.length - a.length);
  let sent = 0;
  const server = http.createServer(async (request, response) => {
    // Cross-origin isolation lets onnxruntime-web use WebAssembly threads (SharedArrayBuffer).
    response.setHeader('Cross-Origin-Opener-Policy', 'same-origin');
    response.setHeader('Cross-Origin-Embedder-Policy', 'require-corp');
    response.setHeader('Cache-Control', 'no-store');
    const file = ['GET', 'HEAD'].includes(request.method ?? '') ? resolveFile(mounts, prefixes, request.url ?? '/') : null;
    const info = file === null ? null : await stat(file).catch(() => null);
    if (file === null || !info?.isFile()) return void response.writeHead(404).end();
    response.writeHead(200, { 'Content-Type': TYPES[path.extname(file)] ?? 'application/octet-stream', 'Content-Length': info.size });
    if (request.method === 'HEAD') return void response.end();
    sent += info.size;
    createReadStream(file).pipe(response);
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve(undefined);
    });
  });
  const timer = lifetimeMs === undefined ? undefined : setTimeout(() => server.close(), lifetimeMs);
  timer?.unref();
  const address = /** @type {import('node:net').AddressInfo} */ (server.address());
  const hostPart = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${hostPart}:${address.port}`,
    bytesSent: () => sent,
    close: () => {
      clearTimeout(timer);
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * The file a request path names under the longest matching mount, or null outside every mount (.. included).
 * @param {Record<string, string>} mounts @param {string[]} prefixes  longest first @param {string} requestUrl
 */
function resolveFile(mounts, prefixes, requestUrl) {
  const url = new URL(requestUrl, 'http://127.0.0.1');
  const prefix = prefixes.find((p) => url.pathname.startsWith(p));
  if (prefix === undefined) return null;
  const root = path.resolve(mounts[prefix]);
  let relative;
  try {
    relative = decodeURIComponent(url.pathname.slice(prefix.length - 1));
  } catch {
    return null; // malformed percent-encoding
  }
  const file = path.resolve(root, '.' + relative);
  return file === root || file.startsWith(root + path.sep) ? file : null;
}
