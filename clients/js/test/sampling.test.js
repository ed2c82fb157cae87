import assert from 'node:assert/strict';
import { it } from 'node:test';
import { SplitMix64, argmax, sample } from '../src/sampling.js';

it('SplitMix64 gives the published sequence for seed 0', () => {
  const rng = new SplitMix64(0);
  assert.equal(rng.nextUint64(), 0xe220a8397b1dcdafn);
  assert.equal(rng.nextUint64(), 0x6e789e6aa1b965f4n);
  const u = new SplitMix64(0).nextUniform();
  assert.ok(u >= 0 && u < 1);
});

it('argmax takes the first of ties; sampling follows the documented procedure', () => {
  const logits = Float32Array.from([1, 3, 3, 0]);
  assert.equal(argmax(logits), 1);
  const flat = { temperature: 1, topK: 0, topP: 1 };
  // probabilities in order [1, 2, 0, 3]: e^3, e^3, e^1, e^0 over their sum
  assert.equal(sample(logits, flat, 0), 1);
  assert.equal(sample(logits, flat, 0.45), 1);
  assert.equal(sample(logits, flat, 0.55), 2);
  assert.equal(sample(logits, flat, 0.999), 3);
  assert.equal(sample(logits, { ...flat, topK: 1 }, 0.3), 1);
  assert.equal(sample(logits, { ...flat, topK: 1 }, 0.99), 2, 'top-k keeps the ties of the k-th (as transformers does)');
  assert.equal(sample(logits, { ...flat, topK: 2 }, 0.99), 2);
  assert.equal(sample(Float32Array.from([5, 0, 0]), { ...flat, topP: 0.5 }, 0.99), 0);
});
