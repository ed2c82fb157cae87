// onnxruntime-node over the fixture exports: tokens equal fixtures/expectations.json.
import assert from 'node:assert/strict';
import { describe, it, before, after } from 'node:test';
import { loadExport } from '../src/node.js';
import { fixtureExports } from './fixtures.js';

for (const { name, folder, expected } of fixtureExports()) {
  describe(`${name} on onnxruntime-node`, () => {
    /** @type {import('../src/model.js').Gpt2Model} */
    let model;
    before(async () => {
      model = await loadExport(folder);
    });
    after(() => model.release());

    it('loads the manifest named precision', () => {
      assert.equal(model.manifest.precision.replace('float', 'fp'), expected.precision.replace('float', 'fp'));
    });

    for (const prompt of expected.prompts) {
      it(`greedy tokens of ${JSON.stringify(prompt.text)} equal the expectations`, async () => {
        assert.deepEqual(model.encode(prompt.text), prompt.ids);
        const result = await model.generate(prompt.text, { maxNewTokens: prompt.greedy.max_new_tokens });
        assert.deepEqual(result.ids, prompt.greedy.ids);
        assert.equal(result.finishReason, prompt.greedy.finish_reason);
        assert.equal(result.text, prompt.greedy.text);
      });

      if (prompt.first_step_top5) {
        const top5 = prompt.first_step_top5;
        it(`top-5 logits after ${JSON.stringify(prompt.text)} within logits_atol`, async () => {
          const logits = await model.nextTokenLogits(prompt.ids);
          top5.ids.forEach((id, i) => {
            const diff = Math.abs(logits[id] - top5.logits[i]);
            assert.ok(diff <= expected.logits_atol, `token ${id}: ${logits[id]} vs ${top5.logits[i]} (atol ${expected.logits_atol})`);
          });
        });
      }
    }

    it('streams the same tokens and text as generate returns', async () => {
      const prompt = expected.prompts[0];
      const streamed = [];
      let text = '';
      const iterator = model.stream(prompt.text, { maxNewTokens: prompt.greedy.max_new_tokens });
      for await (const token of iterator) {
        streamed.push(token.id);
        text += token.text;
      }
      assert.deepEqual(streamed, prompt.greedy.ids);
      assert.equal(text, prompt.greedy.text);
    });

    it('samples reproducibly from a seed, and top-k 1 is greedy', async () => {
      const prompt = expected.prompts[0].text;
      const options = { maxNewTokens: 12, temperature: 1.5, topP: 0.95, stopAtEos: false };
      const a = await model.generate(prompt, { ...options, seed: 7 });
      const b = await model.generate(prompt, { ...options, seed: 7 });
      const c = await model.generate(prompt, { ...options, seed: 8 });
      assert.deepEqual(a.ids, b.ids);
      assert.notDeepEqual(a.ids, c.ids);
      const greedy = await model.generate(prompt, { maxNewTokens: 12, stopAtEos: false });
      const topK1 = await model.generate(prompt, { maxNewTokens: 12, stopAtEos: false, topK: 1, seed: 3 });
      assert.deepEqual(topK1.ids, greedy.ids);
    });

    it('without a seed each call draws a fresh one, so two sampled calls differ', async () => {
      // Temperature 1.5 over the whole vocabulary, 16 tokens: the chance that two independent draws give the same ids
      // (the mean probability of a sampled path, over 20 seeds) was about 1e-42 (int4) and 1e-47 (fp32) here.
      const prompt = expected.prompts[0].text;
      const options = { maxNewTokens: 16, temperature: 1.5, stopAtEos: false };
      const a = await model.generate(prompt, options);
      const b = await model.generate(prompt, options);
      assert.notDeepEqual(a.ids, b.ids);
    });

    it("a seeded prompt samples the same ids alone as beside another prompt's generation", async () => {
      // The seeding rule for a batch: each prompt draws from its own SplitMix64 stream whose initial state is the
      // seed. This client runs one prompt per generation; two generations stepped in turn stand for a batch of two.
      const prompts = [expected.prompts[0].text, expected.prompts[1].text];
      const options = { maxNewTokens: 12, temperature: 1.5, topK: 50, stopAtEos: false, seed: 11 };
      const alone = [];
      for (const prompt of prompts) alone.push((await model.generate(prompt, options)).ids);
      const streams = prompts.map((prompt) => model.stream(prompt, options));
      /** @type {number[][]} */
      const together = [[], []];
      const done = [false, false];
      while (!done.every(Boolean)) {
        for (const i of [0, 1]) {
          if (done[i]) continue;
          const step = await streams[i].next();
          if (step.done) done[i] = true;
          else together[i].push(step.value.id);
        }
      }
      assert.deepEqual(together, alone);
      assert.notDeepEqual(alone[0], alone[1]);
    });
  });
}

describe('the sessions stop spinning when a run returns', () => {
  it('adds session.force_spinning_stop 1 unless the application sets either spinning entry', async () => {
    const { nodeSessionOptions } = await import('../src/node.js');
    assert.deepEqual(nodeSessionOptions(), { extra: { 'session.force_spinning_stop': '1' } });
    assert.deepEqual(nodeSessionOptions({ intraOpNumThreads: 2, extra: { 'session.x': 'y' } }), {
      intraOpNumThreads: 2,
      extra: { 'session.x': 'y', 'session.force_spinning_stop': '1' },
    });
    const flat = { extra: { 'session.intra_op.allow_spinning': '0' } };
    assert.deepEqual(nodeSessionOptions(flat), flat);
    const nested = { extra: { session: { force_spinning_stop: '0' } } };
    assert.deepEqual(nodeSessionOptions(nested), nested);
  });

  it("onnxruntime-node takes the entry, and an application's own nested one", async () => {
    const { folder } = fixtureExports()[0];
    for (const sessionOptions of [undefined, { extra: { session: { intra_op: { allow_spinning: '0' } } } }]) {
      const model = await loadExport(folder, { sessionOptions });
      assert.equal((await model.generate('Hello', { maxNewTokens: 2 })).ids.length, 2);
      await model.release();
    }
  });
});
