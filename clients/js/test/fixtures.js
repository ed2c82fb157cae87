// Where the fixture exports and their expectations are: the repository's fixtures/ (made by
// scripts/make_fixtures.py), or the folder GPT2_ONNX_FIXTURES names.
import { readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const PACKAGE_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const REPO_ROOT = path.resolve(PACKAGE_ROOT, '..', '..');
export const FIXTURES = path.resolve(process.env.GPT2_ONNX_FIXTURES ?? path.join(REPO_ROOT, 'fixtures'));

/**
 * @typedef {{text: string, ids: number[], greedy: {max_new_tokens: number, ids: number[], text: string, finish_reason: string},
 *   first_step_top5?: {ids: number[], logits: number[]}}} PromptExpectation
 * @typedef {{precision: string, logits_atol: number, prompts: PromptExpectation[]}} ExportExpectation
 */

/** @returns {{name: string, folder: string, expected: ExportExpectation}[]} every fixture export, fp32 first */
export function fixtureExports() {
  const file = path.join(FIXTURES, 'expectations.json');
  if (!existsSync(file)) {
    throw new Error(`${file} is missing: run scripts/make_fixtures.py (or point GPT2_ONNX_FIXTURES at a fixtures folder)`);
  }
  const json = JSON.parse(readFileSync(file, 'utf-8'));
  if (json.schema_version !== 1) throw new Error(`${file}: schema_version ${json.schema_version}, these tests read 1`);
  return Object.entries(json.exports).map(([name, expected]) => ({ name, folder: path.join(FIXTURES, name), expected }));
}
