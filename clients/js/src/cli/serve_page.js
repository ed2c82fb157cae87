// gpt2-onnx-js serve-page FOLDER [--port N] [--host ADDRESS]
// Serves the browser page (web/index.html, onnxruntime-web) with the export FOLDER at /export/, the URL the page
// loads by default, prints the page's URL as one line on stdout, and stops on SIGINT or SIGTERM.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { readExportManifest } from '../folder.js';
import { startStaticServer } from '../static_server.js';
import { UsageError, integer, numeric, oneFolder, parseCommand } from './args.js';
import { isMissingPackage, missingPeer } from './peers.js';

const PACKAGE_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Where the export is served: web/index.html's default export URL. */
export const EXPORT_PATH = '/export/';
export const PAGE_PATH = '/web/index.html';

/** @type {import('./args.js').OptionSpecs} */
export const SERVE_PAGE_OPTIONS = {
  port: { type: 'string', default: '8080' }, // not 8000, where `gpt2-onnx serve` listens
  host: { type: 'string', default: '127.0.0.1' },
  help: { type: 'boolean', short: 'h', default: false },
};

// Listen errors that are the caller's choice of address or port, not a fault of the command.
const LISTEN_ERRORS = {
  EADDRINUSE: 'the port is in use',
  EACCES: 'this user may not listen there',
  EADDRNOTAVAIL: "the address is not one of this machine's",
  ENOTFOUND: 'the host name is unknown',
};

/**
 * The folder of an installed package (where its package.json names it), found from the entry Node resolves.
 * @param {string} name
 */
function packageDir(name) {
  let entry;
  try {
    entry = import.meta.resolve(name);
  } catch (error) {
    throw isMissingPackage(error, name) ? missingPeer('serve-page', name) : error;
  }
  let dir = path.dirname(fileURLToPath(entry));
  for (;;) {
    try {
      if (JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf-8')).name === name) return dir;
    } catch {
      // no package.json here: look further up
    }
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`cannot find the folder of the package ${name}`);
    dir = parent;
  }
}

/**
 * What the page fetches: itself, the package's modules, the two bare imports its import map names, and the export.
 * @param {string} folder
 */
export function pageMounts(folder) {
  return {
    '/web/': path.join(PACKAGE_ROOT, 'web'),
    '/src/': path.join(PACKAGE_ROOT, 'src'),
    '/node_modules/onnxruntime-web/': packageDir('onnxruntime-web'),
    '/node_modules/@huggingface/tokenizers/': packageDir('@huggingface/tokenizers'),
    [EXPORT_PATH]: folder,
  };
}

/**
 * @param {string[]} args  after `serve-page` @param {string} usage  printed for --help
 */
export async function servePageCommand(args, usage) {
  const { values, positionals } = parseCommand('serve-page', args, SERVE_PAGE_OPTIONS);
  if (values.help) return void console.log(usage);
  const folder = oneFolder('serve-page', positionals);
  const port = numeric('--port', /** @type {string} */ (values.port), integer((n) => n >= 0 && n <= 65535, 'in [0, 65535] (0 = any free port)'));
  const host = /** @type {string} */ (values.host);
  if (host.trim() === '') throw new UsageError('--host needs an address, such as 127.0.0.1');
  await readExportManifest(folder); // a wrong folder is refused here, not first in the browser
  const server = await startStaticServer(pageMounts(folder), { host, port }).catch((error) => {
    const why = LISTEN_ERRORS[/** @type {keyof typeof LISTEN_ERRORS} */ (error.code)];
    throw why ? new UsageError(`cannot serve on ${host}:${port}: ${why} (${error.code})`) : error;
  });
  process.stdout.write(`${server.url}${PAGE_PATH}\n`);
  await new Promise((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await server.close();
}
