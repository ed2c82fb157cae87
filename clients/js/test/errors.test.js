// Bad input raises the package's typed errors with messages that say what is wrong.
import assert from 'node:assert/strict';
import { cp, mkdtemp, rm, writeFile, readFile, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it, before, after } from 'node:test';
import {
  ChangedFileError, MissingFileError, NotAnExportError, OptionsError, PromptTooLongError, loadExport,
} from '../src/node.js';
import { fixtureExports } from './fixtures.js';

describe('clear errors', () => {
  const [{ folder }] = fixtureExports();
  /** @type {string} */
  let work;
  before(async () => {
    work = await mkdtemp(path.join(tmpdir(), 'gpt2-onnx-js-'));
  });
  after(() => rm(work, { recursive: true, force: true }));

  /** @param {string} name */
  async function copy(name) {
    const target = path.join(work, name);
    await cp(folder, target, { recursive: true, dereference: true });
    return target;
  }

  it('a folder without manifest.json is not an export', async () => {
    await assert.rejects(loadExport(work), (error) => error instanceof NotAnExportError && /not a gpt2-onnx export/.test(error.message));
  });

  it('a missing folder, and a file, are not exports (not ENOENT or ENOTDIR)', async () => {
    await assert.rejects(loadExport(path.join(work, 'absent')), (error) => error instanceof NotAnExportError && /absent: no such folder/.test(error.message));
    const file = path.join(folder, 'manifest.json');
    await assert.rejects(loadExport(file), (error) => error instanceof NotAnExportError && /is a file, not an export folder/.test(error.message));
  });

  it('a manifest of another format is not an export', async () => {
    const target = await copy('other-format');
    await writeFile(path.join(target, 'manifest.json'), JSON.stringify({ format: 'something-else' }));
    await assert.rejects(loadExport(target), NotAnExportError);
  });

  it('a missing graph is named', async () => {
    const target = await copy('missing');
    await unlink(path.join(target, 'decode.onnx'));
    await assert.rejects(loadExport(target), (error) => error instanceof MissingFileError && /decode\.onnx is missing/.test(error.message));
  });

  it('a changed byte is found by sha256, a truncated file by its size', async () => {
    const target = await copy('changed');
    const tokenizer = path.join(target, 'tokenizer.json');
    const bytes = await readFile(tokenizer);
    bytes[20] ^= 1;
    await writeFile(tokenizer, bytes);
    await assert.rejects(loadExport(target), (error) => error instanceof ChangedFileError && /tokenizer\.json has sha256/.test(error.message));
    await writeFile(tokenizer, bytes.subarray(0, 100));
    await assert.rejects(loadExport(target), (error) => error instanceof ChangedFileError && /has 100 bytes/.test(error.message));
  });

  it('a prompt longer than the context, and bad options, are refused before any graph runs', async () => {
    const model = await loadExport(folder);
    const context = model.manifest.nPositions;
    const long = new Array(context).fill(model.encode(' the')[0]);
    await assert.rejects(model.generate(long, { maxNewTokens: 1 }), (error) => error instanceof PromptTooLongError && new RegExp(`context of ${context}`).test(error.message));
    await assert.rejects(model.generate(long.slice(0, context - 4), { maxNewTokens: 5 }), PromptTooLongError);
    await assert.rejects(model.generate('', { maxNewTokens: 1 }), OptionsError);
    await assert.rejects(model.generate('x', { maxNewTokens: 0 }), OptionsError);
    await assert.rejects(model.generate('x', { topP: 0 }), OptionsError);
    await model.release();
  });
});
