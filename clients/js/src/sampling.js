// Token choice: greedy argmax, or seeded sampling with temperature, top-k and top-p.
//
// The random numbers come from SplitMix64 (Steele, Lea and Flood, 2014), computed with BigInt so every platform
// draws the same sequence: state += 0x9E3779B97F4A7C15; z = state; z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9;
// z = (z ^ z >> 27) * 0x94D049BB133111EB; z ^= z >> 31 (all mod 2^64); uniform = (z >> 11) / 2^53, in [0, 1).
// The seed is the initial state (an integer 0 <= seed < 2^64). One uniform is drawn per sampled token. Each generation
// (one prompt) has its own stream, so its tokens never depend on another generation's; a generation without a seed
// draws one fresh random seed (randomSeed), so unseeded sampling differs from call to call, as in the Python runtime
// and the C++ and .NET clients. An explicit seed gives the same ids every time, in all three clients.
//
// A sampled step: scores = logits / temperature; keep the top_k highest scores (ties with the k-th kept too);
// softmax over what is kept; order tokens by probability, highest first (lower id first on ties); keep the shortest
// prefix whose probabilities sum to >= top_p (at least one token); draw u and take the first token at which the
// kept probabilities' running sum, renormalized, exceeds u.
import { OptionsError } from './errors.js';

const MASK64 = (1n << 64n) - 1n;

/** A seeded SplitMix64 stream of uniforms in [0, 1). */
export class SplitMix64 {
  /** @param {number | bigint} seed */
  constructor(seed) {
    const state = BigInt(seed);
    if (state < 0n || state > MASK64) throw new OptionsError(`seed must be an integer in [0, 2^64), not ${seed}`);
    this.state = state;
  }

  /** @returns {bigint} the next 64-bit output */
  nextUint64() {
    this.state = (this.state + 0x9e3779b97f4a7c15n) & MASK64;
    let z = this.state;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK64;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK64;
    return z ^ (z >> 31n);
  }

  /** @returns {number} a uniform double in [0, 1) with 53 random bits */
  nextUniform() {
    return Number(this.nextUint64() >> 11n) / 2 ** 53;
  }
}

/** A fresh random seed in [0, 2^64), from Web Crypto's random numbers (Node 20+ and browsers). @returns {bigint} */
export function randomSeed() {
  return crypto.getRandomValues(new BigUint64Array(1))[0];
}

/**
 * @typedef {{temperature?: number, topK?: number, topP?: number, seed?: number | bigint, doSample?: boolean}} SamplingOptions
 * doSample defaults to true when a temperature, topK, topP or seed is given; temperature 0 means greedy. `seed`, an
 * integer in [0, 2^64), makes the sampled ids repeat; without it each generation draws a fresh random seed.
 */

/**
 * Validate options and return the token selector for one generation (its own SplitMix64 stream when it samples).
 * @param {SamplingOptions} options
 * @returns {(logits: Float32Array) => number}
 */
export function tokenSelector(options) {
  const { temperature = 1, topK = 0, topP = 1 } = options;
  const sampled = options.doSample ?? (options.temperature !== undefined || options.topK !== undefined || options.topP !== undefined || options.seed !== undefined);
  if (!(Number.isFinite(temperature) && temperature >= 0)) throw new OptionsError(`temperature must be >= 0, not ${temperature}`);
  if (!(Number.isInteger(topK) && topK >= 0)) throw new OptionsError(`topK must be an integer >= 0 (0 = off), not ${topK}`);
  if (!(topP > 0 && topP <= 1)) throw new OptionsError(`topP must be in (0, 1], not ${topP}`);
  if (!sampled || temperature === 0) return argmax;
  const rng = new SplitMix64(options.seed ?? randomSeed());
  return (logits) => sample(logits, { temperature, topK, topP }, rng.nextUniform());
}

/** Index of the highest logit; the lowest index on ties (numpy's argmax). @param {Float32Array} logits */
export function argmax(logits) {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
  return best;
}

/**
 * One sampled token (the procedure at the top of this file).
 * @param {Float32Array} logits  (V,)
 * @param {{temperature: number, topK: number, topP: number}} options
 * @param {number} u  a uniform in [0, 1)
 */
export function sample(logits, { temperature, topK, topP }, u) {
  const order = Array.from(logits.keys()).sort((a, b) => logits[b] - logits[a] || a - b); // (V,) ids by logit, desc
  let kept = order.length;
  if (topK > 0 && topK < order.length) {
    const kth = logits[order[topK - 1]];
    kept = topK;
    while (kept < order.length && logits[order[kept]] === kth) kept++;
  }
  const top = logits[order[0]] / temperature;
  const weights = new Float64Array(kept); // (kept,) unnormalized softmax, same order
  let total = 0;
  for (let i = 0; i < kept; i++) total += weights[i] = Math.exp(logits[order[i]] / temperature - top);
  let nucleus = 0;
  let mass = 0;
  while (nucleus < kept && (nucleus === 0 || mass / total < topP)) mass += weights[nucleus++];
  let running = 0;
  for (let i = 0; i < nucleus; i++) {
    running += weights[i] / mass;
    if (u < running) return order[i];
  }
  return order[nucleus - 1];
}
