// The gpt2-onnx-js command: `run` and `serve-page`. Mistakes in the arguments (UsageError) and the package's own
// errors (Gpt2OnnxError: a wrong folder, a changed file, options out of range) are one line on stderr and exit status
// 2; anything else is one line and status 1.
import { readFileSync } from 'node:fs';
import { Gpt2OnnxError } from '../errors.js';
import { UsageError } from './args.js';
import { runCommand } from './run.js';
import { servePageCommand } from './serve_page.js';

export const USAGE = `usage: gpt2-onnx-js run FOLDER --prompt TEXT [--max-new-tokens N] [--json]
                        [--sample] [--temperature T] [--top-k K] [--top-p P] [--seed S] [--ignore-eos]
       gpt2-onnx-js serve-page FOLDER [--port N] [--host ADDRESS]
       gpt2-onnx-js --help | --version

  run         Generates from a gpt2-onnx export folder with onnxruntime-node; greedy unless a sampling flag is
              given (--sample alone samples at temperature 1). --max-new-tokens defaults to 16. --json prints
              {"prompt_ids", "ids", "text", "finish_reason", "load_s", "tokens_per_s"}; otherwise the text streams.
              --seed S (an integer in [0, 2^64)) repeats the sampled ids, here and in the C++ and .NET clients;
              without it each run draws a fresh random seed and samples differently.
  serve-page  Serves the browser page (onnxruntime-web, WebAssembly) with FOLDER at /export/, the URL the page
              loads by default, on 127.0.0.1:8080 unless --host/--port say otherwise (--port 0: any free port).
              Prints the page's URL; Ctrl-C (SIGINT) or SIGTERM stops it.
Bad arguments and wrong folders: one line on stderr, exit status 2.`;

/** @type {Record<string, (args: string[], usage: string) => Promise<void>>} */
const COMMANDS = { run: runCommand, 'serve-page': servePageCommand };

/** @param {string[]} argv  the arguments after the program's name */
export async function main(argv) {
  const [command, ...args] = argv;
  if (command === '--help' || command === '-h') return void console.log(USAGE);
  if (command === '--version') return void console.log(version());
  if (command === undefined) throw new UsageError('no command: run FOLDER --prompt TEXT, or serve-page FOLDER (gpt2-onnx-js --help shows the usage)');
  const handler = COMMANDS[command];
  if (!handler) throw new UsageError(`unknown command '${command}': the commands are run and serve-page (gpt2-onnx-js --help shows the usage)`);
  await handler(args, USAGE);
}

/** The package's version, from its package.json. */
function version() {
  return JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf-8')).version;
}

/**
 * The exit status and the one line an error is reported as.
 * @param {unknown} error @returns {{status: number, line: string}}
 */
export function report(error) {
  const usage = error instanceof UsageError || error instanceof Gpt2OnnxError;
  const message = error instanceof Error ? error.message : String(error);
  return { status: usage ? 2 : 1, line: `gpt2-onnx-js: ${message.replace(/\s*\n\s*/g, ' ')}` };
}
