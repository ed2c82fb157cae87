// The same Gpt2Model code with onnxruntime-web's WebAssembly backend and WebCrypto's sha256, inside Node: what the
// browser runs, without the browser.
import assert from 'node:assert/strict';
import { describe, it, before, after } from 'node:test';
import * as ortWeb from 'onnxruntime-web';
import { Gpt2Model } from '../src/model.js';
import { folderSource } from '../src/node.js';
import { sha256Web } from '../src/web.js';
import { fixtureExports } from './fixtures.js';

for (const { name, folder, expected } of fixtureExports()) {
  describe(`${name} on onnxruntime-web (WebAssembly) in Node`, () => {
    /** @type {Gpt2Model} */
    let model;
    before(async () => {
      ortWeb.env.wasm.numThreads = 1;
      model = await Gpt2Model.load(folderSource(folder), { ort: ortWeb, sha256: sha256Web, sessionOptions: { executionProviders: ['wasm'] } });
    });
    after(() => model.release());

    it('gives the expected greedy tokens for every prompt', async () => {
      for (const prompt of expected.prompts) {
        const result = await model.generate(prompt.text, { maxNewTokens: prompt.greedy.max_new_tokens });
        assert.deepEqual(result.ids, prompt.greedy.ids, JSON.stringify(prompt.text));
      }
    });
  });
}
