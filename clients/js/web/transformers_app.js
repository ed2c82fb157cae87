// window.transformersJs.generate({model, dtype, prompt, maxNewTokens}): transformers.js's greedy generate in the page,
// on a folder served under /tjs/, with no remote models and no CDN (the WebAssembly files are served locally).
// @ts-ignore the browser build has no types of its own; the Node test type-checks the same calls
import { AutoModelForCausalLM, AutoTokenizer, env } from '/node_modules/@huggingface/transformers/dist/transformers.web.js';

const ORT_DIST = '/node_modules/@huggingface/transformers/node_modules/onnxruntime-web/dist/';
env.allowRemoteModels = false;
env.allowLocalModels = true;
env.localModelPath = '/tjs/';
env.useBrowserCache = false;
env.backends.onnx.wasm.wasmPaths = { mjs: `${ORT_DIST}ort-wasm-simd-threaded.asyncify.mjs`, wasm: `${ORT_DIST}ort-wasm-simd-threaded.asyncify.wasm` };

const status = /** @type {HTMLElement} */ (document.getElementById('status'));
const out = /** @type {HTMLElement} */ (document.getElementById('out'));

/** @param {{model: string, dtype: string, prompt: string, maxNewTokens: number}} spec */
async function generate({ model: name, dtype, prompt, maxNewTokens }) {
  status.textContent = `loading ${name} (${dtype}) ...`;
  const tokenizer = await AutoTokenizer.from_pretrained(name, { local_files_only: true });
  const model = await AutoModelForCausalLM.from_pretrained(name, { local_files_only: true, dtype, device: 'wasm' });
  const inputs = tokenizer(prompt, { add_special_tokens: false });
  const output = await model.generate({ ...inputs, max_new_tokens: maxNewTokens, do_sample: false });
  const ids = Array.from(/** @type {BigInt64Array} */ (output.data), Number).slice(inputs.input_ids.dims[1]);
  const text = tokenizer.decode(ids, { skip_special_tokens: true });
  out.textContent += `${dtype} · ${JSON.stringify(prompt)} → ${JSON.stringify(text)}\nids ${JSON.stringify(ids)}\n`;
  await model.dispose();
  status.textContent = 'done';
  return { ids, text };
}

Object.assign(window, { transformersJs: { generate, ready: true } });
