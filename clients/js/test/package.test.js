// The package as applications get it: `npm pack`, then the tarball installed into two fresh folders outside the
// repository exactly as docs/javascript.md tells each kind of application to. A Node application (its own .npmrc
// with onnxruntime-node-install=skip, then `npm install` of the tarball and onnxruntime-node) imports it by name and
// generates the fixtures' greedy ids, and its `gpt2-onnx-js run` does the same. A browser application (`npm install`
// of the tarball and onnxruntime-web: onnxruntime-node, an optional peer dependency, is never installed) type-checks
// against the browser build, and its `gpt2-onnx-js serve-page` page generates in Chromium. Each command that needs
// the ONNX Runtime package the application did not install says so in one line.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { launchChromium, openTab, startServePage } from './browser.js';
import { PACKAGE_ROOT, REPO_ROOT, fixtureExports } from './fixtures.js';
import { BROWSER_APP, NODE_APP } from './package_app.js';

// What ships, and nothing else: no test/, bench/, out/, node_modules/, fixtures, transformers.js test pages.
const SHIPPED = [
  'LICENSE', 'README.md', 'package.json', 'bin/gpt2-onnx-js.js',
  'src/cli/args.js', 'src/cli/main.js', 'src/cli/peers.js', 'src/cli/run.js', 'src/cli/serve_page.js',
  'src/errors.js', 'src/folder.js', 'src/index.js', 'src/integrity.js', 'src/manifest.js', 'src/model.js',
  'src/node.js', 'src/sampling.js', 'src/static_server.js', 'src/text_stream.js', 'src/web.js',
  'types/errors.d.ts', 'types/folder.d.ts', 'types/index.d.ts', 'types/integrity.d.ts', 'types/manifest.d.ts',
  'types/model.d.ts', 'types/node.d.ts', 'types/sampling.d.ts', 'types/text_stream.d.ts', 'types/web.d.ts',
  'web/app.js', 'web/index.html',
].sort();
const TSC = path.join(PACKAGE_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
const PACKAGE = JSON.parse(readFileSync(path.join(PACKAGE_ROOT, 'package.json'), 'utf-8'));
/** What docs/javascript.md and the package's README tell each application to install beside the tarball. */
const DOCS = [path.join(REPO_ROOT, 'docs', 'javascript.md'), path.join(PACKAGE_ROOT, 'README.md')];

/** The environment of an npm run by an application: none of this process's npm settings or ONNX Runtime flags. */
function applicationEnv() {
  return Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^npm_/i.test(key) && !key.startsWith('ONNXRUNTIME_NODE_INSTALL')));
}

/**
 * A proxy that answers nothing: onnxruntime-node's install step sends its downloads through global-agent, which
 * GLOBAL_AGENT_HTTPS_PROXY points here, so an attempt at the CUDA download is counted and fails at once.
 */
async function startTripwire() {
  let connections = 0;
  const server = createServer((_, response) => response.writeHead(503).end());
  server.on('connection', () => connections++);
  server.on('connect', (_, socket) => socket.destroy());
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    url: `http://127.0.0.1:${port}`,
    connections: () => connections,
    close: () => new Promise((resolve) => server.close(() => resolve(undefined))),
  };
}

describe('the packed tarball, installed into a fresh Node application and a fresh browser application', { timeout: 600_000 }, () => {
  /** @type {string} */
  let work;
  /** @type {{filename: string, files: {path: string}[], size: number, unpackedSize: number, entryCount: number}} */
  let pack;
  /** The application folders, by kind. @type {Map<import('./package_app.js').App, string>} */
  const apps = new Map();
  before(async () => {
    work = await mkdtemp(path.join(tmpdir(), 'gpt2-onnx-js-pack-'));
    const json = execFileSync('npm', ['pack', '--json', '--pack-destination', work], { cwd: PACKAGE_ROOT, env: applicationEnv(), encoding: 'utf-8', stdio: ['ignore', 'pipe', 'pipe'] });
    [pack] = JSON.parse(json);
    apps.set(NODE_APP, path.join(work, 'node-app')).set(BROWSER_APP, path.join(work, 'browser-app'));
  });
  after(() => work && rm(work, { recursive: true, force: true }));

  it('ships exactly the package files (npm pack and the tarball agree)', (t) => {
    assert.deepEqual(pack.files.map((file) => file.path).sort(), SHIPPED);
    const entries = execFileSync('tar', ['-tzf', path.join(work, pack.filename)], { encoding: 'utf-8' }).trim().split('\n');
    assert.deepEqual(entries.map((entry) => entry.replace(/^package\//, '')).sort(), SHIPPED);
    t.diagnostic(`${pack.filename}: ${pack.entryCount} files, package size ${pack.size} B, unpacked size ${pack.unpackedSize} B`);
  });

  it("exports: each condition object holds conditions only, `types` first (TypeScript takes the first that matches)", () => {
    const { exports } = JSON.parse(readFileSync(path.join(PACKAGE_ROOT, 'package.json'), 'utf-8'));
    /** @param {string} where @param {unknown} target */
    const check = (where, target) => {
      if (typeof target === 'string') return;
      const keys = Object.keys(/** @type {object} */ (target));
      for (const key of keys) assert.ok(['types', 'browser', 'node', 'default'].includes(key), `${where}: '${key}' is not a condition`);
      if (keys.includes('types')) assert.equal(keys[0], 'types', `${where}: types is not first`);
      else for (const key of keys) check(`${where}[${JSON.stringify(key)}]`, /** @type {Record<string, unknown>} */ (target)[key]);
    };
    for (const [subpath, target] of Object.entries(exports)) check(`exports[${JSON.stringify(subpath)}]`, target);
  });

  it("ships the repository's licence and the package's own README", () => {
    const unpacked = path.join(work, 'unpacked');
    execFileSync('mkdir', ['-p', unpacked]);
    execFileSync('tar', ['-xzf', path.join(work, pack.filename), '-C', unpacked]);
    assert.deepEqual(readFileSync(path.join(unpacked, 'package', 'LICENSE')), readFileSync(path.join(REPO_ROOT, 'LICENSE')));
    assert.match(readFileSync(path.join(unpacked, 'package', 'README.md'), 'utf-8'), /^# gpt2-onnx \(JavaScript\)\n/);
  });

  for (const [kind, app] of /** @type {const} */ ([['Node', NODE_APP], ['browser', BROWSER_APP]])) {
    it(`a ${kind} application installs the tarball and ${app.peer}, not ${app.absent}, as the docs say; no CUDA download tried`, async () => {
      const folder = /** @type {string} */ (apps.get(app));
      const peer = `${app.peer}@${PACKAGE.peerDependencies[app.peer]}`;
      for (const doc of DOCS) {
        assert.ok(readFileSync(doc, 'utf-8').includes(`npm install path/to/${pack.filename} ${peer}\n`), `${doc} names npm install path/to/${pack.filename} ${peer}`);
      }
      await mkdir(folder);
      for (const [name, text] of Object.entries(app.files)) await writeFile(path.join(folder, name), text);
      const tripwire = await startTripwire();
      try {
        const install = spawnSync('npm', ['install', path.join(work, pack.filename), peer, '--prefer-offline', '--no-audit', '--no-fund'], {
          cwd: folder,
          env: { ...applicationEnv(), GLOBAL_AGENT_HTTPS_PROXY: tripwire.url, GLOBAL_AGENT_HTTP_PROXY: tripwire.url },
          encoding: 'utf-8',
          timeout: 500_000,
        });
        assert.equal(install.status, 0, `npm install failed:\n${install.stdout}\n${install.stderr}`);
        assert.equal(tripwire.connections(), 0, 'onnxruntime-node tried a download');
      } finally {
        await tripwire.close();
      }
      const modules = path.join(folder, 'node_modules');
      assert.ok(existsSync(path.join(modules, app.peer, 'package.json')), `${app.peer} is installed`);
      assert.ok(!existsSync(path.join(modules, app.absent)), `${app.absent} is not installed`);
      const bin = path.join(modules, 'onnxruntime-node', 'bin', 'napi-v6', 'linux', 'x64');
      assert.ok(!existsSync(path.join(bin, 'libonnxruntime_providers_cuda.so')), 'no CUDA provider library was installed');
      const installed = JSON.parse(readFileSync(path.join(modules, 'gpt2-onnx', 'package.json'), 'utf-8'));
      assert.equal(installed.version, PACKAGE.version);
    });
  }

  it("the Node application imports 'gpt2-onnx' by name and generates the fixtures' greedy ids", () => {
    const app = /** @type {string} */ (apps.get(NODE_APP));
    for (const { folder, expected } of fixtureExports()) {
      const prompts = expected.prompts.map((p) => ({ text: p.text, maxNewTokens: p.greedy.max_new_tokens }));
      const out = JSON.parse(execFileSync(process.execPath, ['generate.js', folder, JSON.stringify(prompts)], { cwd: app, encoding: 'utf-8' }));
      assert.equal(out.resolved, path.join(app, 'node_modules', 'gpt2-onnx', 'src', 'node.js'), 'the installed copy, not the repository');
      assert.deepEqual(out.ids, expected.prompts.map((p) => p.greedy.ids));
    }
  });

  it("the Node application's gpt2-onnx-js run generates and refuses bad input in one line; serve-page names onnxruntime-web", () => {
    const app = /** @type {string} */ (apps.get(NODE_APP));
    const command = path.join(app, 'node_modules', '.bin', 'gpt2-onnx-js');
    for (const { folder, expected } of fixtureExports()) {
      const prompt = expected.prompts[0];
      const result = spawnSync(command, ['run', folder, '--prompt', prompt.text, '--max-new-tokens', String(prompt.greedy.max_new_tokens), '--json'], { cwd: app, encoding: 'utf-8' });
      assert.equal(result.status, 0, result.stderr);
      assert.deepEqual(JSON.parse(result.stdout).ids, prompt.greedy.ids);
    }
    const bad = spawnSync(command, ['run', fixtureExports()[0].folder, '--prompt', 'hi', '--max-new-tokens', '-3'], { cwd: app, encoding: 'utf-8' });
    assert.equal(bad.status, 2);
    assert.equal(bad.stderr, "gpt2-onnx-js: --max-new-tokens takes an integer >= 1, not '-3'\n");
    const page = spawnSync(command, ['serve-page', fixtureExports()[0].folder, '--port', '0'], { cwd: app, encoding: 'utf-8', timeout: 60_000 });
    assert.equal(page.status, 1, page.stderr);
    const version = PACKAGE.peerDependencies['onnxruntime-web'];
    assert.equal(page.stderr, `gpt2-onnx-js: serve-page needs onnxruntime-web, which is not installed beside gpt2-onnx: npm install onnxruntime-web@${version}\n`);
  });

  it("the browser application's serve-page serves the page that generates the same ids in Chromium; run names onnxruntime-node", async () => {
    const app = /** @type {string} */ (apps.get(BROWSER_APP));
    const command = path.join(app, 'node_modules', '.bin', 'gpt2-onnx-js');
    const [{ folder, expected }] = fixtureExports();
    const prompt = expected.prompts[0];
    const server = await startServePage(folder, command);
    const chromium = await launchChromium();
    try {
      const tab = await openTab(chromium.browser, server.url, 'gpt2onnx');
      const result = await tab.generate({ model: '/export/', prompt: prompt.text, maxNewTokens: prompt.greedy.max_new_tokens });
      assert.deepEqual(result.ids, prompt.greedy.ids, tab.console.join('\n'));
    } finally {
      await chromium.close();
      assert.equal((await server.stop()).code, 0);
    }
    const run = spawnSync(command, ['run', folder, '--prompt', 'hi'], { cwd: app, encoding: 'utf-8' });
    assert.equal(run.status, 1, run.stderr);
    const version = PACKAGE.peerDependencies['onnxruntime-node'];
    assert.equal(run.stderr, `gpt2-onnx-js: run needs onnxruntime-node, which is not installed beside gpt2-onnx: npm install onnxruntime-node@${version}\n`);
    assert.equal(run.stdout, '');
  });

  it("the shipped types check each application's JavaScript (Node; a bundler's browser build)", () => {
    for (const app of [NODE_APP, BROWSER_APP]) {
      const cwd = /** @type {string} */ (apps.get(app));
      const result = spawnSync(process.execPath, [TSC, '-p', 'tsconfig.json'], { cwd, encoding: 'utf-8' });
      assert.equal(result.status, 0, `${path.basename(cwd)}:\n${result.stdout}${result.stderr}`);
    }
  });
});
