// A small static file server for the browser test and benchmark: 127.0.0.1 only, an ephemeral port, GET/HEAD only,
// paths confined to the mounted folders, and it closes itself after `lifetimeMs` if the caller never does.
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
 * Serve `mounts` (URL prefix -> folder), e.g. {'/': packageRoot, '/models/': fixtures}.
 * @param {Record<string, string>} mounts @param {{lifetimeMs?: number}} [options]
 * @returns {Promise<{url: string, close: () => Promise<void>, bytesSent: () => number}>}
 */
export async function startStaticServer(mounts, { lifetimeMs = 300_000 } = {}) {
  const prefixes = Object.keys(mounts).sort((a, b) => b.length - a.length);
  let sent = 0;
  const server = http.createServer(async (request, response) => {
    const url = new URL(request.url ?? '/', 'http://127.0.0.1');
    const prefix = prefixes.find((p) => url.pathname.startsWith(p));
    const root = prefix === undefined ? undefined : path.resolve(mounts[prefix]);
    const file = prefix === undefined || !root ? undefined : path.resolve(root, '.' + decodeURIComponent(url.pathname.slice(prefix.length - 1)));
    // Cross-origin isolation lets onnxruntime-web use WebAssembly threads (SharedArrayBuffer).
    response.setHeader('Cross-Origin-Opener-Policy', 'same-origin');
    response.setHeader('Cross-Origin-Embedder-Policy', 'require-corp');
    response.setHeader('Cache-Control', 'no-store');
    if (!root || !file || (file !== root && !file.startsWith(root + path.sep)) || !['GET', 'HEAD'].includes(request.method ?? '')) {
      return void response.writeHead(404).end();
    }
    const info = await stat(file).catch(() => null);
    if (!info?.isFile()) return void response.writeHead(404).end();
    response.writeHead(200, { 'Content-Type': TYPES[path.extname(file)] ?? 'application/octet-stream', 'Content-Length': info.size });
    if (request.method === 'HEAD') return void response.end();
    sent += info.size;
    createReadStream(file).pipe(response);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const timer = setTimeout(() => server.close(), lifetimeMs);
  timer.unref();
  const address = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    url: `http://127.0.0.1:${address.port}`,
    bytesSent: () => sent,
    close: () => {
      clearTimeout(timer);
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
