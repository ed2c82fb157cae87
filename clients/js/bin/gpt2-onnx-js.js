#!/usr/bin/env node
// gpt2-onnx-js run FOLDER --prompt TEXT [--max-new-tokens N] [--json] [--temperature T --top-k K --top-p P --seed S]
import { parseArgs } from 'node:util';
import { Gpt2OnnxError, loadExport } from '../src/node.js';

const USAGE = `usage: gpt2-onnx-js run FOLDER --prompt TEXT [--max-new-tokens N] [--json]
                        [--sample] [--temperature T] [--top-k K] [--top-p P] [--seed S] [--ignore-eos]
  Generates from a gpt2-onnx export folder with onnxruntime-node. Greedy unless a sampling flag is given.
  --json prints {"prompt_ids", "ids", "text", "finish_reason", "load_s", "tokens_per_s"}; otherwise the text streams.`;

/** @param {string[]} argv */
async function main(argv) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
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
    },
  });
  if (values.help) return void console.log(USAGE);
  const [command, folder, ...rest] = positionals;
  if (command !== 'run' || !folder || rest.length > 0 || values.prompt === undefined) throw new UsageError(USAGE);
  const sampled = values.sample || ['temperature', 'top-k', 'top-p', 'seed'].some((k) => values[/** @type {'seed'} */ (k)] !== undefined);
  const options = {
    maxNewTokens: integer(values['max-new-tokens'], '--max-new-tokens'),
    stopAtEos: !values['ignore-eos'],
    doSample: sampled,
    ...(values.temperature !== undefined && { temperature: Number(values.temperature) }),
    ...(values['top-k'] !== undefined && { topK: integer(values['top-k'], '--top-k') }),
    ...(values['top-p'] !== undefined && { topP: Number(values['top-p']) }),
    ...(values.seed !== undefined && { seed: BigInt(integer(values.seed, '--seed')) }),
  };
  const started = performance.now();
  const model = await loadExport(folder);
  const loaded = performance.now();
  const stream = model.stream(values.prompt, options);
  let step = await stream.next();
  while (!step.done) {
    if (!values.json) process.stdout.write(step.value.text);
    step = await stream.next();
  }
  const result = step.value;
  const seconds = (performance.now() - loaded) / 1000;
  if (values.json) {
    const out = {
      prompt_ids: result.promptIds, ids: result.ids, text: result.text, finish_reason: result.finishReason,
      load_s: (loaded - started) / 1000, tokens_per_s: result.ids.length / seconds,
    };
    console.log(JSON.stringify(out));
  } else {
    process.stdout.write('\n');
  }
  await model.release();
}

class UsageError extends Error {}

/** @param {string | undefined} text @param {string} flag */
function integer(text, flag) {
  const value = Number(text);
  if (!Number.isInteger(value)) throw new UsageError(`${flag} takes an integer, not '${text}'`);
  return value;
}

main(process.argv.slice(2)).catch((error) => {
  if (error instanceof UsageError || error instanceof Gpt2OnnxError || error?.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    console.error(`gpt2-onnx-js: ${error.message}`);
    process.exit(2);
  }
  throw error;
});
