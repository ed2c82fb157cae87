// The page: load an export over HTTP with onnxruntime-web and stream greedy tokens into the document.
// window.gpt2onnx.generate(spec) is what the browser test and benchmark call.
import { loadExport, ort } from '../src/web.js';

/** @type {Map<string, {model: import('../src/model.js').Gpt2Model, loadMs: number}>} */
const loaded = new Map();
const status = /** @type {HTMLElement} */ (document.getElementById('status'));
const runs = /** @type {HTMLElement} */ (document.getElementById('runs'));

/** @param {string} url */
async function load(url) {
  const known = loaded.get(url);
  if (known) return known;
  status.textContent = `loading ${url} ...`;
  const started = performance.now();
  const model = await loadExport(url);
  const entry = { model, loadMs: performance.now() - started };
  loaded.set(url, entry);
  return entry;
}

/**
 * @param {{model: string, prompt: string, maxNewTokens: number}} spec
 */
async function generate({ model: url, prompt, maxNewTokens }) {
  const { model, loadMs } = await load(url);
  const block = document.createElement('section');
  block.innerHTML = `<h3></h3><pre></pre><p class="ids"></p>`;
  const [title, text, idsLine] = /** @type {HTMLElement[]} */ (Array.from(block.children));
  title.textContent = `${model.manifest.precision} · ${url} · loaded in ${loadMs.toFixed(0)} ms`;
  const promptNode = document.createElement('b');
  promptNode.textContent = prompt;
  text.append(promptNode);
  runs.append(block);
  status.textContent = 'generating ...';
  const started = performance.now();
  const stream = model.stream(prompt, { maxNewTokens });
  let step = await stream.next();
  while (!step.done) {
    text.append(step.value.text);
    step = await stream.next();
  }
  const seconds = (performance.now() - started) / 1000;
  const result = { ...step.value, loadMs, tokensPerSecond: step.value.ids.length / seconds, threads: ort.env.wasm.numThreads };
  idsLine.textContent = `ids ${JSON.stringify(result.ids)} · ${result.finishReason} · ${result.tokensPerSecond.toFixed(1)} tokens/s`;
  status.textContent = 'done';
  return result;
}

/** @param {string} url */
async function forget(url) {
  await loaded.get(url)?.model.release();
  loaded.delete(url);
}

Object.assign(window, { gpt2onnx: { generate, forget, ready: true } });

document.getElementById('form')?.addEventListener('submit', (event) => {
  event.preventDefault();
  const value = (/** @type {string} */ id) => /** @type {HTMLInputElement} */ (document.getElementById(id)).value;
  generate({ model: value('model'), prompt: value('prompt'), maxNewTokens: Number(value('max')) }).catch((error) => {
    status.textContent = `error: ${error.message}`;
  });
});
