// The command line: `gpt2-onnx-js run FOLDER --prompt TEXT --max-new-tokens N --json`.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { it } from 'node:test';
import { PACKAGE_ROOT, fixtureExports } from './fixtures.js';

const BIN = path.join(PACKAGE_ROOT, 'bin', 'gpt2-onnx-js.js');

/** @param {string[]} args */
const cli = (args) => spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf-8' });

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

it('bad input is one line on stderr and exit status 2', () => {
  const notExport = cli(['run', PACKAGE_ROOT, '--prompt', 'x']);
  assert.equal(notExport.status, 2);
  assert.match(notExport.stderr, /^gpt2-onnx-js: .*no manifest\.json; this is not a gpt2-onnx export folder\n$/);
  const usage = cli(['run']);
  assert.equal(usage.status, 2);
  assert.match(usage.stderr, /usage: gpt2-onnx-js run FOLDER --prompt TEXT/);
  const badFlag = cli(['run', fixtureExports()[0].folder, '--prompt', 'x', '--max-new-tokens', 'many']);
  assert.equal(badFlag.status, 2);
  assert.match(badFlag.stderr, /--max-new-tokens takes an integer/);
});
