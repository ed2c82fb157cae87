// The command line: `gpt2-onnx-js run FOLDER --prompt TEXT --max-new-tokens N --json`, and every bad argument or
// wrong folder as one `gpt2-onnx-js: ...` line on stderr with exit status 2.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { PACKAGE_ROOT, fixtureExports } from './fixtures.js';

export const BIN = path.join(PACKAGE_ROOT, 'bin', 'gpt2-onnx-js.js');

/** @param {string[]} args */
const cli = (args) => spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf-8', timeout: 60_000 });

it('run --json prints the fixtures\' greedy ids and text', () => {
  for (const { folder, expected } of fixtureExports()) {
    const prompt = expected.prompts[0];
    const result = cli(['run', folder, '--prompt', prompt.text, '--max-new-tokens', String(prompt.greedy.max_new_tokens), '--json']);
    assert.equal(result.status, 0, result.stderr);
    const out = JSON.parse(result.stdout);
    assert.deepEqual(out.prompt_ids, prompt.ids);
    assert.deepEqual(out.ids, prompt.greedy.ids);
    assert.equal(out.text, prompt.greedy.text);
    assert.equal(out.finish_reason, prompt.greedy.finish_reason);
  }
});

it('without --json the text streams to stdout', () => {
  const [{ folder, expected }] = fixtureExports();
  const prompt = expected.prompts[0];
  const result = cli(['run', folder, '--prompt', prompt.text, '--max-new-tokens', String(prompt.greedy.max_new_tokens)]);
  assert.equal(result.status, 0, result.stderr);
  assert.equal(result.stdout, `${prompt.greedy.text}\n`);
});

it('run samples differently each time without --seed, and gives the same ids again with it', () => {
  // Temperature 1.5 over the whole vocabulary, 16 tokens: two unseeded runs agree by chance with probability about
  // 1e-47 here (test/node.test.js says how that was measured).
  const [{ folder, expected }] = fixtureExports();
  const sampled = (/** @type {string[]} */ ...flags) => {
    const args = ['run', folder, '--prompt', expected.prompts[0].text, '--max-new-tokens', '16', '--temperature', '1.5', '--ignore-eos', '--json'];
    const result = cli([...args, ...flags]);
    assert.equal(result.status, 0, result.stderr);
    return JSON.parse(result.stdout).ids;
  };
  assert.notDeepEqual(sampled(), sampled());
  assert.deepEqual(sampled('--seed', '7'), sampled('--seed', '7'));
});

it('--help prints the usage of both commands; --version the package version', () => {
  const help = cli(['--help']);
  assert.equal(help.status, 0);
  assert.match(help.stdout, /gpt2-onnx-js run FOLDER --prompt TEXT/);
  assert.match(help.stdout, /gpt2-onnx-js serve-page FOLDER \[--port N\] \[--host ADDRESS\]/);
  assert.match(help.stdout, /without it each run draws a fresh random seed/);
  assert.equal(cli(['run', '--help']).stdout, help.stdout);
  const version = cli(['--version']);
  assert.equal(version.stdout, `${JSON.parse(readFileSync(path.join(PACKAGE_ROOT, 'package.json'), 'utf-8')).version}\n`);
});

describe('bad input: one line on stderr, exit status 2', () => {
  const [{ folder }] = fixtureExports();
  /** @type {string} */
  let empty;
  /** @type {import('node:net').Server} */
  let busy;
  let busyPort = 0;
  before(async () => {
    empty = await mkdtemp(path.join(tmpdir(), 'gpt2-onnx-js-cli-'));
    busy = createServer();
    await new Promise((resolve) => busy.listen(0, '127.0.0.1', () => resolve(undefined)));
    busyPort = /** @type {import('node:net').AddressInfo} */ (busy.address()).port;
  });
  after(async () => {
    await rm(empty, { recursive: true, force: true });
    await new Promise((resolve) => busy.close(() => resolve(undefined)));
  });

  const run = (/** @type {string[]} */ ...flags) => ['run', folder, '--prompt', 'hi', ...flags];
  /** @type {[string, () => string[], RegExp][]} */
  const cases = [
    ['a negative --max-new-tokens', () => run('--max-new-tokens', '-3'), /--max-new-tokens takes an integer >= 1, not '-3'/],
    ['a negative --temperature', () => run('--temperature', '-1'), /--temperature takes a number >= 0, not '-1'/],
    ['a negative --seed', () => run('--seed', '-1'), /--seed takes an integer in \[0, 2\^64\), not '-1'/],
    ['a negative --top-k', () => run('--top-k', '-2'), /--top-k takes an integer >= 0 \(0 = off\), not '-2'/],
    ['--max-new-tokens 0', () => run('--max-new-tokens', '0'), /--max-new-tokens takes an integer >= 1, not '0'/],
    ['a word for a number', () => run('--max-new-tokens', 'many'), /--max-new-tokens takes an integer >= 1, not 'many'/],
    ['a fraction for an integer', () => run('--top-k', '2.5'), /--top-k takes an integer >= 0/],
    ['--top-p 0', () => run('--top-p', '0'), /--top-p takes a number in \(0, 1\], not '0'/],
    ['--top-p above 1', () => run('--top-p', '1.5'), /--top-p takes a number in \(0, 1\], not '1\.5'/],
    ['a seed of 2^64', () => run('--seed', '18446744073709551616'), /--seed takes an integer in \[0, 2\^64\)/],
    ['a temperature that is not a number', () => run('--temperature', 'hot'), /--temperature takes a number >= 0, not 'hot'/],
    ['an unknown option', () => run('--colour'), /unknown option --colour for run/],
    ['an unknown short option', () => run('-x'), /unknown option -x for run/],
    ['a value for a flag that takes none', () => run('--json=yes'), /--json takes no value/],
    ['--prompt without its value', () => ['run', folder, '--prompt'], /--prompt needs a value$/],
    ['--max-new-tokens without its value', () => run('--max-new-tokens'), /--max-new-tokens needs a value$/],
    ['an option where a value belongs', () => run('--seed', '--json'), /--seed needs a value \(write --seed=VALUE/],
    ['no command', () => [], /no command: run FOLDER --prompt TEXT, or serve-page FOLDER/],
    ['an unknown command', () => ['walk', folder], /unknown command 'walk': the commands are run and serve-page/],
    ['run without a folder', () => ['run', '--prompt', 'hi'], /run needs an export FOLDER/],
    ['run without --prompt', () => ['run', folder], /run needs --prompt TEXT/],
    ['two folders', () => ['run', folder, folder, '--prompt', 'hi'], /run takes one FOLDER, not also/],
    ['a file instead of a folder', () => ['run', path.join(PACKAGE_ROOT, 'package.json'), '--prompt', 'hi'], /package\.json is a file, not an export folder/],
    ['a missing folder', () => ['run', path.join(empty, 'absent'), '--prompt', 'hi'], /absent: no such folder/],
    ['a folder without manifest.json', () => ['run', empty, '--prompt', 'hi'], /no manifest\.json; this is not a gpt2-onnx export folder/],
    ['an empty prompt', () => ['run', folder, '--prompt', ''], /the prompt is empty/],
    ['a prompt beyond the context', () => run('--max-new-tokens', '100000'), /more than the model's context of \d+ positions/],
    ['serve-page: a missing folder', () => ['serve-page', path.join(empty, 'absent')], /absent: no such folder/],
    ['serve-page: a file', () => ['serve-page', path.join(PACKAGE_ROOT, 'package.json')], /is a file, not an export folder/],
    ['serve-page: a folder without manifest.json', () => ['serve-page', empty], /no manifest\.json/],
    ['serve-page: no folder', () => ['serve-page'], /serve-page needs an export FOLDER/],
    ['serve-page: a port out of range', () => ['serve-page', folder, '--port', '70000'], /--port takes an integer in \[0, 65535\]/],
    ['serve-page: a negative port', () => ['serve-page', folder, '--port', '-1'], /--port takes an integer in \[0, 65535\]/],
    ['serve-page: --port without its value', () => ['serve-page', folder, '--port'], /--port needs a value$/],
    ['serve-page: an empty --host', () => ['serve-page', folder, '--host', ''], /--host needs an address/],
    ['serve-page: an unknown option', () => ['serve-page', folder, '--prompt', 'hi'], /unknown option --prompt for serve-page/],
    ['serve-page: a port in use', () => ['serve-page', folder, '--port', String(busyPort)], /cannot serve on 127\.0\.0\.1:\d+: the port is in use \(EADDRINUSE\)/],
  ];
  for (const [what, args, message] of cases) {
    it(what, () => {
      const result = cli(args());
      assert.equal(result.status, 2, `exit status; stderr: ${result.stderr}`);
      assert.match(result.stderr, /^gpt2-onnx-js: [^\n]+\n$/, 'one line');
      assert.match(result.stderr.trimEnd(), message);
      assert.equal(result.stdout, '');
    });
  }
});
