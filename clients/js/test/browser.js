// Headless Chromium (the system's, never a downloaded one) on the package's pages, served from 127.0.0.1: by the
// `gpt2-onnx-js serve-page` command itself (the page test), or in-process with extra mounts (the transformers.js
// test and the benchmark). Shared by the tests and bench/bench.js.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import puppeteer from 'puppeteer-core';
import { startStaticServer } from '../src/static_server.js';
import { PACKAGE_ROOT } from './fixtures.js';

export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const BIN = path.join(PACKAGE_ROOT, 'bin', 'gpt2-onnx-js.js');

// Root in CI (no sandbox), no GPU here, and no connections of Chromium's own (this machine refuses them).
const CHROMIUM_FLAGS = [
  '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--disable-dev-shm-usage',
];

/** Chromium with a fresh profile folder, removed again by close(). */
export async function launchChromium() {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install chromium (or set CHROMIUM)`);
  const userDataDir = await mkdtemp(path.join(tmpdir(), 'gpt2-onnx-js-chromium-'));
  const browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true, userDataDir, args: CHROMIUM_FLAGS });
  return {
    browser,
    close: async () => {
      await browser.close();
      await rm(userDataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Open `url` in a new tab and wait for the page's global `ready` to say it is ready; the tab's console and every
 * request that leaves the page's origin are collected.
 * @param {import('puppeteer-core').Browser} browser @param {string} url @param {string} ready
 */
export async function openTab(browser, url, ready) {
  const origin = new URL(url).origin;
  /** @type {string[]} */
  const console_ = [];
  const page = await browser.newPage();
  page.on('console', (message) => console_.push(`${message.type()}: ${message.text()}`));
  page.on('pageerror', (error) => console_.push(`pageerror: ${error}`));
  page.on('request', (request) => {
    const target = request.url();
    if (!target.startsWith(origin) && !target.startsWith(`blob:${origin}`)) console_.push(`request outside the local server: ${target}`);
  });
  await page.setViewport({ width: 1100, height: 900 });
  try {
    await page.goto(url, { waitUntil: 'load' });
    await page.waitForFunction((name) => /** @type {any} */ (window)[name]?.ready, { timeout: 30_000 }, ready);
  } catch (error) {
    await page.close();
    throw new Error(`${error}\nbrowser console:\n${console_.join('\n')}`);
  }
  return {
    page,
    console: console_,
    /** @param {{model: string, prompt: string, maxNewTokens: number}} spec */
    generate: (spec) => page.evaluate((s) => /** @type {any} */ (window).gpt2onnx.generate(s), spec),
    /** @param {string} model */
    forget: (model) => page.evaluate((m) => /** @type {any} */ (window).gpt2onnx.forget(m), model),
  };
}

/**
 * `gpt2-onnx-js serve-page FOLDER --port 0` as a child process: resolves once it has printed the page's URL.
 * stop(signal) sends the signal and resolves with how the process ended.
 * @param {string} folder @param {string} [command]  the gpt2-onnx-js to run: this package's bin by default
 */
export async function startServePage(folder, command) {
  const [program, ...args] = command === undefined ? [process.execPath, BIN] : [command];
  const child = spawn(program, [...args, 'serve-page', folder, '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  /** @type {Promise<{code: number | null, signal: NodeJS.Signals | null}>} */
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const lines = createInterface({ input: child.stdout });
  const url = await Promise.race([
    new Promise((resolve) => lines.once('line', resolve)),
    exited.then(({ code }) => Promise.reject(new Error(`serve-page exited with status ${code} before printing a URL: ${stderr}`))),
  ]);
  return {
    url: /** @type {string} */ (url),
    /** @param {NodeJS.Signals} signal */
    stop: async (signal = 'SIGTERM') => {
      child.kill(signal);
      return { ...(await exited), stderr };
    },
  };
}

/**
 * Serve the package root and `modelsFolder` at /models/ (plus `extraMounts`) in this process, and open `pagePath` in
 * a fresh Chromium; close() ends both.
 * @param {string} modelsFolder @param {Record<string, string>} [extraMounts]
 * @param {{page?: string, ready?: string}} [which]  the page, and the global it sets when ready
 */
export async function openPage(modelsFolder, extraMounts = {}, { page: pagePath = '/web/index.html', ready = 'gpt2onnx' } = {}) {
  const server = await startStaticServer({ '/': PACKAGE_ROOT, '/models/': modelsFolder, ...extraMounts }, { lifetimeMs: 600_000 });
  const chromium = await launchChromium().catch(async (error) => {
    await server.close();
    throw error;
  });
  const close = async () => {
    await chromium.close();
    await server.close();
  };
  try {
    const tab = await openTab(chromium.browser, `${server.url}${pagePath}`, ready);
    return { ...tab, server, close };
  } catch (error) {
    await close();
    throw error;
  }
}
