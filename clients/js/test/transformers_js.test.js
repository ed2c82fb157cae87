// `gpt2-onnx transformers-js` turns the fixture exports into a transformers.js model folder; @huggingface/transformers
// loads it from disk only (local_files_only, no remote models) and its greedy generate gives our tokens.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it, before, after } from 'node:test';
import { AutoModelForCausalLM, AutoTokenizer, env } from '@huggingface/transformers';
import { openPage } from './browser.js';
import { PACKAGE_ROOT, REPO_ROOT, fixtureExports } from './fixtures.js';

// The Python command line that makes the folder: GPT2_ONNX_CLI, else the virtual environment VENV (relative to the
// repository, or absolute; .venv by default). Where it is missing (PyPI packages do not install everywhere) the
// suite is one skipped test with one line saying why, under `npm test` and ci.sh alike.
const CLI = process.env.GPT2_ONNX_CLI ?? path.resolve(REPO_ROOT, process.env.VENV ?? '.venv', 'bin', 'gpt2-onnx');
const SKIP = existsSync(CLI)
  ? false
  : `the Python gpt2-onnx command, which converts the fixtures for transformers.js, is not installed (${CLI}): scripts/setup.sh installs it, or set GPT2_ONNX_CLI`;
/** @type {Record<string, string>} */
const DTYPES = { fp32: 'fp32', float32: 'fp32', int4: 'q4', int8: 'q8', fp16: 'fp16', float16: 'fp16' };

describe('transformers.js loads the folder gpt2-onnx transformers-js makes', { timeout: 240_000 }, () => {
  // One skipped test stands for the suite, so that the summary counts the skip.
  if (SKIP) return void it('converts the fixtures and generates with transformers.js in Node and Chromium', { skip: SKIP });
  const exports = fixtureExports().filter(({ expected }) => ['fp32', 'float32', 'int4'].includes(expected.precision));
  /** @type {string} */
  let work;
  before(async () => {
    work = await mkdtemp(path.join(tmpdir(), 'gpt2-onnx-tjs-'));
    execFileSync(CLI, ['transformers-js', ...exports.map((e) => e.folder), '-o', path.join(work, 'model')], { stdio: 'pipe' });
    env.allowRemoteModels = false;
    env.allowLocalModels = true;
    env.localModelPath = work;
  });
  after(() => work && rm(work, { recursive: true, force: true }));

  for (const { name, expected } of exports) {
    const dtype = DTYPES[expected.precision];
    it(`dtype ${dtype} (${name}): greedy generate equals the expectations`, async () => {
      const tokenizer = await AutoTokenizer.from_pretrained('model', { local_files_only: true });
      const model = await AutoModelForCausalLM.from_pretrained('model', { local_files_only: true, dtype: /** @type {any} */ (dtype), device: 'cpu' });
      try {
        for (const prompt of expected.prompts) {
          const inputs = tokenizer(prompt.text, { add_special_tokens: false });
          assert.deepEqual(Array.from(inputs.input_ids.data, Number), prompt.ids);
          const output = /** @type {import('@huggingface/transformers').Tensor} */ (
            await model.generate({ ...inputs, max_new_tokens: prompt.greedy.max_new_tokens, do_sample: false })
          );
          const ids = Array.from(output.data, Number).slice(prompt.ids.length);
          assert.deepEqual(ids, prompt.greedy.ids, `prompt ${JSON.stringify(prompt.text)}`);
          const text = tokenizer.decode(ids, { skip_special_tokens: true });
          assert.equal(text, prompt.greedy.text);
        }
      } finally {
        await model.dispose();
      }
    });
  }

  it('in headless Chromium, transformers.js\'s browser build (WebAssembly) gives the same tokens', async () => {
    const browser = await openPage(work, { '/tjs/': work }, { page: '/web/transformers.html', ready: 'transformersJs' });
    try {
      for (const { expected } of exports) {
        const dtype = DTYPES[expected.precision];
        for (const prompt of expected.prompts) {
          const spec = { model: 'model', dtype, prompt: prompt.text, maxNewTokens: prompt.greedy.max_new_tokens };
          const result = await browser.page.evaluate((s) => /** @type {any} */ (window).transformersJs.generate(s), spec);
          assert.deepEqual(result.ids, prompt.greedy.ids, `${dtype} ${JSON.stringify(prompt.text)}\n${browser.console.join('\n')}`);
          assert.equal(result.text, prompt.greedy.text);
        }
      }
      assert.deepEqual(browser.console.filter((line) => line.startsWith('request outside')), []);
      await mkdir(path.join(PACKAGE_ROOT, 'out'), { recursive: true });
      await browser.page.screenshot({ path: path.join(PACKAGE_ROOT, 'out', 'transformers-js-browser.png'), fullPage: true });
    } finally {
      await browser.close();
    }
  });
});
