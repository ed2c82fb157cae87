// onnxruntime-node and onnxruntime-web are optional peer dependencies (package.json): an application installs the one
// it runs on, so neither may be there. `run` needs onnxruntime-node and `serve-page` onnxruntime-web; where it is
// missing, the command says so in one line with the npm command that installs the version this package is tested with.
import { readFileSync } from 'node:fs';

/** The `peerDependencies` of this package's package.json. @returns {Record<string, string>} */
function peerVersions() {
  return JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf-8')).peerDependencies;
}

/**
 * Whether `error` is Node's "Cannot find package 'NAME'" (an import or import.meta.resolve of a package not installed).
 * @param {unknown} error @param {string} name
 */
export function isMissingPackage(error, name) {
  const { code, message } = /** @type {{code?: unknown, message?: unknown}} */ (error ?? {});
  return code === 'ERR_MODULE_NOT_FOUND' && typeof message === 'string' && message.includes(`'${name}'`);
}

/**
 * The error a command reports when the peer dependency it runs on is not installed (exit status 1: not the input).
 * @param {string} command @param {string} name
 */
export function missingPeer(command, name) {
  const version = peerVersions()[name];
  return new Error(`${command} needs ${name}, which is not installed beside gpt2-onnx: npm install ${version ? `${name}@${version}` : name}`);
}
