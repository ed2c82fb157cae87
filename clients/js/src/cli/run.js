// gpt2-onnx-js run FOLDER --prompt TEXT [--max-new-tokens N] [--json] [--sample] [--temperature T] [--top-k K]
//                  [--top-p P] [--seed S] [--ignore-eos]
// The C++ and .NET clients print the same --json object and sample with the same SplitMix64 procedure, so that one
// seed gives the same ids in all three; without --seed a sampled run draws a fresh random seed.
import { UsageError, bigInteger, decimal, integer, numeric, oneFolder, parseCommand } from './args.js';
import { isMissingPackage, missingPeer } from './peers.js';

/** @type {import('./args.js').OptionSpecs} */
export const RUN_OPTIONS = {
  prompt: { type: 'string' },
  'max-new-tokens': { type: 'string', default: '16' },
  json: { type: 'boolean', default: false },
  sample: { type: 'boolean', default: false },
  temperature: { type: 'string' },
  'top-k': { type: 'string' },
  'top-p': { type: 'string' },
  seed: { type: 'string' },
  'ignore-eos': { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
};

const SAMPLING_FLAGS = ['temperature', 'top-k', 'top-p', 'seed'];

/**
 * The generation options the flags ask for, every value checked before anything is loaded.
 * @param {Record<string, string | boolean | undefined>} values
 * @returns {import('../model.js').GenerateOptions}
 */
export function generateOptions(values) {
  /** @param {string} name */
  const text = (name) => /** @type {string | undefined} */ (values[name]);
  const temperature = text('temperature');
  const topK = text('top-k');
  const topP = text('top-p');
  const seed = text('seed');
  return {
    maxNewTokens: numeric('--max-new-tokens', /** @type {string} */ (text('max-new-tokens')), integer((n) => n >= 1, '>= 1')),
    stopAtEos: !values['ignore-eos'],
    doSample: Boolean(values.sample) || SAMPLING_FLAGS.some((name) => values[name] !== undefined),
    ...(temperature !== undefined && { temperature: numeric('--temperature', temperature, decimal((t) => t >= 0, '>= 0')) }),
    ...(topK !== undefined && { topK: numeric('--top-k', topK, integer((k) => k >= 0, '>= 0 (0 = off)')) }),
    ...(topP !== undefined && { topP: numeric('--top-p', topP, decimal((p) => p > 0 && p <= 1, 'in (0, 1]')) }),
    ...(seed !== undefined && { seed: numeric('--seed', seed, bigInteger((s) => s >= 0n && s < 2n ** 64n, 'in [0, 2^64)')) }),
  };
}

/** src/node.js, imported only when `run` runs: onnxruntime-node, which it imports, is an optional peer dependency. */
async function nodeBuild() {
  try {
    return await import('../node.js');
  } catch (error) {
    throw isMissingPackage(error, 'onnxruntime-node') ? missingPeer('run', 'onnxruntime-node') : error;
  }
}

/**
 * @param {string[]} args  after `run` @param {string} usage  printed for --help
 */
export async function runCommand(args, usage) {
  const { values, positionals } = parseCommand('run', args, RUN_OPTIONS);
  if (values.help) return void console.log(usage);
  const folder = oneFolder('run', positionals);
  const prompt = /** @type {string | undefined} */ (values.prompt);
  if (prompt === undefined) throw new UsageError('run needs --prompt TEXT');
  const options = generateOptions(values);
  const started = performance.now();
  const { loadExport } = await nodeBuild();
  const model = await loadExport(folder);
  const loaded = performance.now();
  try {
    const stream = model.stream(prompt, options);
    let step = await stream.next();
    while (!step.done) {
      if (!values.json) process.stdout.write(step.value.text);
      step = await stream.next();
    }
    const result = step.value;
    const seconds = (performance.now() - loaded) / 1000;
    if (!values.json) return void process.stdout.write('\n');
    const out = {
      prompt_ids: result.promptIds, ids: result.ids, text: result.text, finish_reason: result.finishReason,
      load_s: (loaded - started) / 1000, tokens_per_s: result.ids.length / seconds,
    };
    console.log(JSON.stringify(out));
  } finally {
    await model.release();
  }
}
