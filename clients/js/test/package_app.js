// The two tiny applications test/package.test.js installs the packed tarball into, each with what
// docs/javascript.md tells such an application to write and install. A Node application: package.json, .npmrc
// (onnxruntime-node's install step skipped), a script that generates through the documented API and a type-checked
// file; it installs the tarball and onnxruntime-node. A browser application (built with a bundler; here only its
// type check and the package's own page): package.json and a type-checked file; it installs the tarball and
// onnxruntime-web, and no .npmrc, since onnxruntime-node is not installed. The type-checked files' @ts-expect-error
// lines fail if the types were `any`. skipLibCheck as applications set it: onnxruntime-common's and
// @huggingface/tokenizers' own .d.ts files do not check under nodenext without the DOM library.

const GENERATE = `import { loadExport } from 'gpt2-onnx';

// node generate.js FOLDER '[{"text": ..., "maxNewTokens": N}, ...]'  ->  {"resolved": ..., "ids": [[...], ...]}
const [folder, prompts] = process.argv.slice(2);
const model = await loadExport(folder);
const ids = [];
for (const { text, maxNewTokens } of JSON.parse(prompts)) ids.push((await model.generate(text, { maxNewTokens })).ids);
await model.release();
console.log(JSON.stringify({ resolved: new URL(import.meta.resolve('gpt2-onnx')).pathname, ids }));
`;

const CHECK_NODE = `// @ts-check
import { ChangedFileError, Gpt2OnnxError, loadExport, nodeSessionOptions } from 'gpt2-onnx';
import { loadExport as loadFromNode } from 'gpt2-onnx/node';

/** @param {string} folder @returns {Promise<{ids: number[], finish: 'eos' | 'length', text: string}>} */
export async function run(folder) {
  const model = await loadExport(folder, { sessionOptions: nodeSessionOptions({ intraOpNumThreads: 1 }), checkAllFiles: true });
  const { ids, finishReason, text } = await model.generate('The os module', { maxNewTokens: 4, temperature: 0.8, topP: 0.9, seed: 1n });
  for await (const token of model.stream([464, 28686], { maxNewTokens: 2 })) ids.push(token.id);
  await model.release();
  // @ts-expect-error maxNewTokens is a number
  await loadFromNode(folder).then((m) => m.generate('x', { maxNewTokens: 'many' }));
  // @ts-expect-error loadExport takes a folder name
  await loadExport(42);
  return { ids, finish: finishReason, text };
}

/** @param {unknown} error */
export const isOurs = (error) => error instanceof Gpt2OnnxError && !(error instanceof ChangedFileError);
`;

const CHECK_BROWSER = `// @ts-check
import { loadExport, ort, urlSource } from 'gpt2-onnx';

/** @param {string} url */
export async function run(url) {
  ort.env.wasm.numThreads = 1;
  const source = urlSource(url);
  const model = await loadExport(source.where, { sessionOptions: { executionProviders: ['wasm'] } });
  /** @type {number[]} */
  const ids = (await model.generate('x', { maxNewTokens: 2 })).ids;
  // @ts-expect-error topP is a number
  await model.generate('x', { topP: 'high' });
  return ids;
}
`;

/** @param {Record<string, unknown>} compilerOptions @param {string} file */
const tsconfig = (compilerOptions, file) =>
  JSON.stringify({ compilerOptions: { target: 'es2022', allowJs: true, checkJs: true, noEmit: true, strict: true, types: [], skipLibCheck: true, ...compilerOptions }, files: [file] }, null, 2);

/** @param {string} name */
const packageJson = (name) => JSON.stringify({ name, version: '1.0.0', private: true, type: 'module' }, null, 2);

/**
 * @typedef {{files: Record<string, string>, peer: string, absent: string}} App
 * `peer`: the ONNX Runtime package it installs beside the tarball; `absent`: the one it must not get.
 */

/** @type {App} */
export const NODE_APP = {
  files: {
    'package.json': packageJson('gpt2-onnx-packed-node-app'),
    '.npmrc': 'onnxruntime-node-install=skip\n',
    'generate.js': GENERATE,
    'check.js': CHECK_NODE,
    'tsconfig.json': tsconfig({ module: 'nodenext', moduleResolution: 'nodenext', lib: ['es2022'] }, 'check.js'),
  },
  peer: 'onnxruntime-node',
  absent: 'onnxruntime-web',
};

/** @type {App} */
export const BROWSER_APP = {
  files: {
    'package.json': packageJson('gpt2-onnx-packed-browser-app'),
    'check.js': CHECK_BROWSER,
    'tsconfig.json': tsconfig({ module: 'esnext', moduleResolution: 'bundler', customConditions: ['browser'], lib: ['es2022', 'dom'] }, 'check.js'),
  },
  peer: 'onnxruntime-web',
  absent: 'onnxruntime-node',
};
