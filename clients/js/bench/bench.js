// Load time and tokens/s of the fixture exports in Node (onnxruntime-node) and in headless Chromium
// (onnxruntime-web, WebAssembly), measured side by side in one run: each round loads every export afresh in both,
// alternating, so other work on the machine slows both alike. Writes benchmarks/results/<time>-js.json and a table beside it (.md).
//   node bench/bench.js [--rounds 5] [--new-tokens 64] [--exports pydocs-micro-fp32,pydocs-micro-int4]
import { execFileSync } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadExport } from '../src/node.js';
import { openPage, CHROMIUM } from '../test/browser.js';
import { FIXTURES, PACKAGE_ROOT, REPO_ROOT } from '../test/fixtures.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    warmup: { type: 'string', default: '1' },
    'new-tokens': { type: 'string', default: '64' },
    exports: { type: 'string', default: 'pydocs-micro-fp32,pydocs-micro-int4' },
    prompt: { type: 'string', default: 'The os module provides' },
  },
});
const rounds = Number(values.rounds);
const warmup = Number(values.warmup); // rounds run first and not counted (WebAssembly compiles, caches fill)
const maxNewTokens = Number(values['new-tokens']);
const names = values.exports.split(',');
const prompt = values.prompt;
const generation = { maxNewTokens, stopAtEos: false };

/** @param {number[]} xs */
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** @param {string} name @param {number} [threads]  intra-op threads; undefined: onnxruntime-node's default */
async function nodeRound(name, threads) {
  const started = performance.now();
  const sessionOptions = threads === undefined ? {} : { intraOpNumThreads: threads, interOpNumThreads: 1 };
  const model = await loadExport(path.join(FIXTURES, name), { checkAllFiles: false, sessionOptions }); // the browser's file set
  const loadMs = performance.now() - started;
  const t0 = performance.now();
  const result = await model.generate(prompt, generation);
  const tokensPerSecond = result.ids.length / ((performance.now() - t0) / 1000);
  await model.release();
  return { loadMs, tokensPerSecond, ids: result.ids };
}

async function main() {
  const browser = await openPage(FIXTURES);
  /** @type {Record<string, {node: any[], node1: any[], browser: any[]}>} */
  const samples = Object.fromEntries(names.map((n) => [n, { node: [], node1: [], browser: [] }]));
  try {
    for (let round = -warmup; round < rounds; round++) {
      for (const name of names) {
        const node = await nodeRound(name);
        const node1 = await nodeRound(name, 1);
        const url = `/models/${name}/`;
        const web = await browser.generate({ model: url, prompt, maxNewTokens });
        await browser.forget(url);
        if (round < 0) continue;
        samples[name].node.push(node);
        samples[name].node1.push(node1);
        samples[name].browser.push({ loadMs: web.loadMs, tokensPerSecond: web.tokensPerSecond, ids: web.ids, threads: web.threads });
      }
    }
  } finally {
    await browser.close();
  }
  const rows = await Promise.all(names.map(async (name) => summary(name, samples[name])));
  const result = { what: 'clients/js/bench/bench.js', prompt, max_new_tokens: maxNewTokens, rounds, warmup_rounds: warmup, environment: environment(), rows };
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\.\d+/, '');
  const dir = path.join(REPO_ROOT, 'benchmarks', 'results');
  await mkdir(dir, { recursive: true });
  const base = path.join(dir, `${stamp}-js`);
  await writeFile(`${base}.json`, JSON.stringify(result, null, 2) + '\n');
  await writeFile(`${base}.md`, table(result));
  console.log(table(result));
  console.log(`wrote ${base}.json and .md`);
}

/** @param {string} name @param {{node: any[], node1: any[], browser: any[]}} s */
async function summary(name, s) {
  const manifest = JSON.parse(await readFile(path.join(FIXTURES, name, 'manifest.json'), 'utf-8'));
  const fetched = [manifest.graphs.prefill.file, manifest.graphs.decode.file, manifest.weights_file, 'tokenizer.json', 'tokenizer_config.json', 'manifest.json'];
  const bytes = fetched.reduce((sum, file) => sum + (manifest.files[file]?.size ?? 0), 0);
  const sameTokens = s.browser.every((b, i) => JSON.stringify(b.ids) === JSON.stringify(s.node[i].ids) && JSON.stringify(b.ids) === JSON.stringify(s.node1[i].ids));
  /** @param {any[]} xs */
  const figures = (xs) => ({ load_ms: median(xs.map((x) => x.loadMs)), tokens_per_s: median(xs.map((x) => x.tokensPerSecond)) });
  const node = figures(s.node);
  const node1 = figures(s.node1);
  const web = { load_ms: median(s.browser.map((x) => x.loadMs)), tokens_per_s: median(s.browser.map((x) => x.tokensPerSecond)), wasm_threads: s.browser[0].threads };
  return {
    export: name, precision: manifest.precision, source: manifest.model?.source, export_options: manifest.export?.options, download_bytes: bytes, same_tokens_node_and_browser: sameTokens,
    node, node_1_thread: node1, browser: web,
    browser_over_node: { load_time: web.load_ms / node.load_ms, tokens_per_s: web.tokens_per_s / node.tokens_per_s },
    browser_over_node_1_thread: { load_time: web.load_ms / node1.load_ms, tokens_per_s: web.tokens_per_s / node1.tokens_per_s },
    per_round: { node: s.node.map(({ ids, ...x }) => x), node_1_thread: s.node1.map(({ ids, ...x }) => x), browser: s.browser.map(({ ids, ...x }) => x) },
  };
}

/** @param {{environment: Record<string, any>, rows: any[], rounds: number, max_new_tokens: number, prompt: string}} r */
function table(r) {
  const e = r.environment;
  const lines = [
    `# JavaScript: Node (onnxruntime-node) vs headless Chromium (onnxruntime-web, WebAssembly)`,
    '',
    `${e.cpu}, ${e.cpu_count} cores, ${e.memory_gib} GiB; Node ${e.node}, ${e.chromium}, onnxruntime-node ${e['onnxruntime-node']}, onnxruntime-web ${e['onnxruntime-web']}.`,
    `${e.machine_note}. Medians of ${r.rounds} rounds after a warm-up round; each round loads each export afresh (files fetched, sha256 checked, sessions created) and generates ${r.max_new_tokens} greedy tokens after ${JSON.stringify(r.prompt)}.`,
    '',
    'Node runs twice per round: onnxruntime-node\'s default threads (intra-op = cores) and one intra-op thread (what the browser\'s WebAssembly gets here). Ratios: browser / Node, per figure (load: higher is slower; tokens/s: lower is slower).',
    '',
    '| export | download | load: Node / Node 1 thread / browser | load, browser ÷ Node (÷ Node 1 thread) | tokens/s: Node / Node 1 thread / browser | tokens/s, browser ÷ Node (÷ Node 1 thread) | same tokens |',
    '| --- | ---: | ---: | ---: | ---: | ---: | --- |',
  ];
  for (const row of r.rows) {
    const ms = (/** @type {number} */ x) => x.toFixed(0);
    const ratio = (/** @type {number} */ x) => `${x.toFixed(2)}×`;
    lines.push(
      `| ${row.export} | ${(row.download_bytes / 2 ** 20).toFixed(1)} MiB | ${ms(row.node.load_ms)} / ${ms(row.node_1_thread.load_ms)} / ${ms(row.browser.load_ms)} ms | ` +
        `${ratio(row.browser_over_node.load_time)} (${ratio(row.browser_over_node_1_thread.load_time)}) | ` +
        `${ms(row.node.tokens_per_s)} / ${ms(row.node_1_thread.tokens_per_s)} / ${ms(row.browser.tokens_per_s)} (${row.browser.wasm_threads} WASM thread) | ` +
        `${ratio(row.browser_over_node.tokens_per_s)} (${ratio(row.browser_over_node_1_thread.tokens_per_s)}) | ${row.same_tokens_node_and_browser ? 'yes' : 'NO'} |`,
    );
  }
  lines.push('', 'Exports: ' + r.rows.map((row) => `${row.export} = \`${row.source}\` ${JSON.stringify(row.export_options ?? {})}`).join('; ') + '.');
  return lines.join('\n') + '\n';
}

function environment() {
  const lscpu = execFileSync('lscpu', { encoding: 'utf-8' });
  const model = /Model name:\s*(.+)/.exec(lscpu)?.[1].trim();
  /** @param {string} pkg */
  const version = (pkg) => JSON.parse(execFileSync('npm', ['ls', pkg, '--json', '--depth=0'], { cwd: PACKAGE_ROOT, encoding: 'utf-8' })).dependencies?.[pkg]?.version;
  return {
    cpu: model, cpu_count: os.cpus().length, memory_gib: Math.round(os.totalmem() / 2 ** 30),
    node: process.version, chromium: execFileSync(CHROMIUM, ['--version'], { encoding: 'utf-8' }).trim(),
    'onnxruntime-node': version('onnxruntime-node'), 'onnxruntime-web': version('onnxruntime-web'),
    machine_note: 'Shared with other work while measured: absolute figures are noisy; the ratios come from rounds alternating Node and the browser',
    node_threads: 'onnxruntime-node default (intra-op threads = cores)',
  };
}

await main();
