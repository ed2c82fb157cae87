// The page generates the fixtures' expected greedy tokens in headless Chromium with onnxruntime-web (WebAssembly),
// and leaves a screenshot in clients/js/out/browser.png.
import assert from 'node:assert/strict';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it, before, after } from 'node:test';
import { openPage } from './browser.js';
import { FIXTURES, PACKAGE_ROOT, fixtureExports } from './fixtures.js';

export const SCREENSHOT = path.join(PACKAGE_ROOT, 'out', 'browser.png');

describe('the page in headless Chromium', { timeout: 240_000 }, () => {
  /** @type {Awaited<ReturnType<typeof openPage>>} */
  let browser;
  /** @type {string} */
  let broken;
  before(async () => {
    // A copy of the first export with one byte of its decode graph changed, served at /broken/.
    broken = await mkdtemp(path.join(tmpdir(), 'gpt2-onnx-js-web-'));
    await cp(fixtureExports()[0].folder, broken, { recursive: true, dereference: true });
    const graph = await readFile(path.join(broken, 'decode.onnx'));
    graph[graph.length - 1] ^= 1;
    await writeFile(path.join(broken, 'decode.onnx'), graph);
    browser = await openPage(FIXTURES, { '/broken/': broken });
  });
  after(async () => {
    await rm(broken, { recursive: true, force: true });
    await mkdir(path.dirname(SCREENSHOT), { recursive: true });
    await browser?.page.screenshot({ path: SCREENSHOT, fullPage: true });
    await browser?.close();
  });

  for (const { name, expected } of fixtureExports()) {
    for (const prompt of expected.prompts) {
      it(`${name}: ${JSON.stringify(prompt.text)} gives the expected tokens`, async () => {
        const result = await browser.generate({ model: `/models/${name}/`, prompt: prompt.text, maxNewTokens: prompt.greedy.max_new_tokens });
        assert.deepEqual(result.promptIds, prompt.ids);
        assert.deepEqual(result.ids, prompt.greedy.ids, `browser console:\n${browser.console.join('\n')}`);
        assert.equal(result.text, prompt.greedy.text);
        assert.equal(result.finishReason, prompt.greedy.finish_reason);
        await browser.page.evaluate(() => {
          const lines = document.querySelectorAll('.ids');
          lines[lines.length - 1].textContent += ' · equals fixtures/expectations.json ✓';
        });
      });
    }
  }

  /** @param {string} url */
  const loadError = (url) =>
    browser.page.evaluate(async (u) => {
      const module = '/src/web.js';
      const { loadExport } = await import(module);
      return loadExport(u).then(() => 'loaded', (/** @type {Error} */ e) => `${e.name}: ${e.message}`);
    }, url);

  it('a changed file is refused in the browser too (WebCrypto sha256)', async () => {
    assert.match(await loadError('/broken/'), /ChangedFileError: .*decode\.onnx has sha256/);
  });

  it('a URL with no export behind it is not an export', async () => {
    assert.match(await loadError('/models/no-such-export/'), /NotAnExportError: .*no manifest\.json/);
  });
});
