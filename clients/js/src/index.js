// Runtime-agnostic entry: bring your own ONNX Runtime module and Source (see node.js and web.js for ready ones).
export { Gpt2Model } from './model.js';
export { parseManifest, MANIFEST_FILE } from './manifest.js';
export { SplitMix64, randomSeed, tokenSelector, argmax, sample } from './sampling.js';
export * from './errors.js';
