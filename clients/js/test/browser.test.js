// The page in headless Chromium, served by `gpt2-onnx-js serve-page FOLDER` exactly as docs/javascript.md tells a
// user to: for each fixture export, the page's default export URL gives the fixtures' greedy tokens with
// onnxruntime-web (WebAssembly); a changed file and a URL with no export are refused in the page; the command stops
// on SIGTERM and SIGINT. Screenshots: clients/js/out/browser-<export>.png.
import assert from 'node:assert/strict';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { launchChromium, openTab, startServePage } from './browser.js';
import { PACKAGE_ROOT, fixtureExports } from './fixtures.js';

const OUT = path.join(PACKAGE_ROOT, 'out');

/** The export URL the page loads by default (its input field). @param {import('puppeteer-core').Page} page */
const defaultExportUrl = (page) => page.$eval('#model', (input) => /** @type {HTMLInputElement} */ (input).value);

/**
 * What loadExport(url) says in the page: 'loaded', or the error's name and message.
 * @param {import('puppeteer-core').Page} page @param {string} url
 */
const loadResult = (page, url) =>
  page.evaluate(async (u) => {
    const module = '/src/web.js';
    const { loadExport } = await import(module);
    return loadExport(u).then(() => 'loaded', (/** @type {Error} */ e) => `${e.name}: ${e.message}`);
  }, url);

describe('the page in headless Chromium, served by gpt2-onnx-js serve-page', { timeout: 240_000 }, () => {
  /** @type {Awaited<ReturnType<typeof launchChromium>>} */
  let chromium;
  before(async () => {
    chromium = await launchChromium();
    await mkdir(OUT, { recursive: true });
  });
  after(() => chromium?.close());

  for (const { name, folder, expected } of fixtureExports()) {
    it(`${name}: every prompt gives the expected tokens at the page's default export URL`, async () => {
      const server = await startServePage(folder);
      assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+\/web\/index\.html$/);
      const tab = await openTab(chromium.browser, server.url, 'gpt2onnx');
      try {
        const model = await defaultExportUrl(tab.page);
        for (const prompt of expected.prompts) {
          const result = await tab.generate({ model, prompt: prompt.text, maxNewTokens: prompt.greedy.max_new_tokens });
          const context = `${JSON.stringify(prompt.text)}; browser console:\n${tab.console.join('\n')}`;
          assert.deepEqual(result.promptIds, prompt.ids, context);
          assert.deepEqual(result.ids, prompt.greedy.ids, context);
          assert.equal(result.text, prompt.greedy.text);
          assert.equal(result.finishReason, prompt.greedy.finish_reason);
          await tab.page.evaluate(() => {
            const lines = document.querySelectorAll('.ids');
            lines[lines.length - 1].textContent += ' · equals fixtures/expectations.json ✓';
          });
        }
        assert.deepEqual(tab.console.filter((line) => line.startsWith('request outside')), []);
        await tab.page.screenshot({ path: path.join(OUT, `browser-${name}.png`), fullPage: true });
      } finally {
        await tab.page.close();
        assert.deepEqual(await server.stop('SIGTERM'), { code: 0, signal: null, stderr: '' }, 'SIGTERM stops it cleanly');
      }
    });
  }

  it('a changed file is refused in the page (WebCrypto sha256), a URL with no export is not an export, SIGINT stops it', async () => {
    // A copy of the first export with one byte of its decode graph changed.
    const broken = await mkdtemp(path.join(tmpdir(), 'gpt2-onnx-js-web-'));
    await cp(fixtureExports()[0].folder, broken, { recursive: true, dereference: true });
    const graph = await readFile(path.join(broken, 'decode.onnx'));
    graph[graph.length - 1] ^= 1;
    await writeFile(path.join(broken, 'decode.onnx'), graph);
    const server = await startServePage(broken);
    const tab = await openTab(chromium.browser, server.url, 'gpt2onnx');
    try {
      assert.match(await loadResult(tab.page, await defaultExportUrl(tab.page)), /ChangedFileError: .*decode\.onnx has sha256/);
      assert.match(await loadResult(tab.page, '/export/no-such-export/'), /NotAnExportError: .*no manifest\.json/);
    } finally {
      await tab.page.close();
      assert.deepEqual(await server.stop('SIGINT'), { code: 0, signal: null, stderr: '' }, 'SIGINT stops it cleanly');
      await rm(broken, { recursive: true, force: true });
    }
  });
});
