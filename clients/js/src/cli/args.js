// Command-line parsing for gpt2-onnx-js: node:util's parseArgs, with every mistake turned into one UsageError line
// (parseArgs' own errors are several lines and name its internals).
import { parseArgs } from 'node:util';

/** A mistake on the command line: the command prints its message as one line and exits with status 2. */
export class UsageError extends Error {}

/**
 * @typedef {Record<string, {type: 'string' | 'boolean', short?: string, default?: string | boolean}>} OptionSpecs
 * @typedef {{values: Record<string, string | boolean | undefined>, positionals: string[]}} ParsedCommand
 */

// A value that starts with '-' and reads as a number (-3, -0.5, -.5): taken as the option's value, so that the range
// check can say what is wrong with it, where parseArgs calls it ambiguous.
const NEGATIVE_NUMBER = /^-\.?\d/;

/**
 * Parse one command's arguments (after the command's name).
 * @param {string} command  for messages @param {string[]} args @param {OptionSpecs} options
 * @returns {ParsedCommand}
 */
export function parseCommand(command, args, options) {
  const joined = joinNegativeValues(args, options);
  try {
    return parseArgs({ args: joined, options, allowPositionals: true, strict: true });
  } catch (error) {
    throw new UsageError(parseArgsMessage(command, /** @type {Error & {code?: string}} */ (error)));
  }
}

/**
 * `--flag -3` becomes `--flag=-3`; a string option with no value after it, or followed by another option, is refused.
 * @param {string[]} args @param {OptionSpecs} options
 */
function joinNegativeValues(args, options) {
  /** @type {string[]} */
  const out = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === '--') return [...out, ...args.slice(i)];
    const name = arg.startsWith('--') && !arg.includes('=') ? arg.slice(2) : undefined;
    if (name === undefined || options[name]?.type !== 'string') {
      out.push(arg);
      continue;
    }
    const value = args[i + 1];
    if (value === undefined) throw new UsageError(`${arg} needs a value`);
    if (value.startsWith('-') && value !== '-') {
      if (!NEGATIVE_NUMBER.test(value)) throw new UsageError(`${arg} needs a value (write ${arg}=VALUE for one that starts with '-')`);
      out.push(`${arg}=${value}`);
    } else {
      out.push(arg, value);
    }
    i++;
  }
  return out;
}

/** @param {string} command @param {Error & {code?: string}} error */
function parseArgsMessage(command, error) {
  const quoted = /'([^']+)'/.exec(error.message)?.[1] ?? '';
  switch (error.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      return `unknown option ${quoted} for ${command} (gpt2-onnx-js --help lists the options)`;
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE':
      if (/does not take an argument/.test(error.message)) return `${quoted} takes no value`;
      return error.message.split('\n')[0];
    default:
      throw error;
  }
}

/**
 * @template T
 * @typedef {{parse: (text: string) => T | null, ok: (value: T) => boolean, rule: string}} NumericKind
 */

/** Decimal integers only: no '', no 0x10, no 1e3. @param {string} text */
const integerText = (text) => /^[+-]?\d+$/.test(text);

/** @type {(ok: (value: number) => boolean, rule: string) => NumericKind<number>} */
export const integer = (ok, rule) => ({ parse: (text) => (integerText(text) ? Number(text) : null), ok, rule: `an integer ${rule}` });

/** @type {(ok: (value: bigint) => boolean, rule: string) => NumericKind<bigint>} */
export const bigInteger = (ok, rule) => ({ parse: (text) => (integerText(text) ? BigInt(text) : null), ok, rule: `an integer ${rule}` });

/** @type {(ok: (value: number) => boolean, rule: string) => NumericKind<number>} */
export const decimal = (ok, rule) => ({
  parse: (text) => (/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(text) && Number.isFinite(Number(text)) ? Number(text) : null),
  ok,
  rule: `a number ${rule}`,
});

/**
 * An option's numeric value, or a UsageError "--flag takes RULE, not 'TEXT'".
 * @template T
 * @param {string} flag @param {string} text @param {NumericKind<T>} kind @returns {T}
 */
export function numeric(flag, text, kind) {
  const value = kind.parse(text.trim());
  if (value === null || !kind.ok(value)) throw new UsageError(`${flag} takes ${kind.rule}, not '${text}'`);
  return value;
}

/**
 * The one FOLDER a command takes.
 * @param {string} command @param {string[]} positionals
 */
export function oneFolder(command, positionals) {
  const [folder, ...rest] = positionals;
  if (folder === undefined) throw new UsageError(`${command} needs an export FOLDER (gpt2-onnx-js --help shows the usage)`);
  if (rest.length > 0) throw new UsageError(`${command} takes one FOLDER, not also ${rest.map((x) => `'${x}'`).join(' ')}`);
  return folder;
}
