import assert from 'node:assert/strict';
import { it } from 'node:test';
import { SplitMix64, argmax, randomSeed, sample, tokenSelector } from '../src/sampling.js';

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

it('a seeded selector repeats its draws; without a seed each selector draws a fresh seed', () => {
  // Equal logits over GPT-2's 50,257 tokens: every draw picks any token with the same probability, so two unseeded
  // selectors agree on 8 draws with probability 50257^-8 (about 2.5e-38).
  const flat = new Float32Array(50257);
  const draws = (/** @type {(logits: Float32Array) => number} */ select) => Array.from({ length: 8 }, () => select(flat));
  assert.deepEqual(draws(tokenSelector({ temperature: 1.5, seed: 7n })), draws(tokenSelector({ temperature: 1.5, seed: 7 })));
  assert.notDeepEqual(draws(tokenSelector({ temperature: 1.5 })), draws(tokenSelector({ temperature: 1.5 })));
  const seed = randomSeed();
  assert.ok(typeof seed === 'bigint' && seed >= 0n && seed < 2n ** 64n);
  assert.notEqual(randomSeed(), randomSeed());
});
