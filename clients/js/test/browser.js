// Headless Chromium (the system's, never a downloaded one) on the page web/index.html, served with the fixture
// exports from 127.0.0.1. Shared by the browser test and the benchmark.
import { existsSync } from 'node:fs';
import puppeteer from 'puppeteer-core';
import { PACKAGE_ROOT } from './fixtures.js';
import { startStaticServer } from './static_server.js';

export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';

/**
 * Serve the package and `modelsFolder` at /models/, open the page, and hand back a handle.
 * @param {string} modelsFolder @param {Record<string, string>} [extraMounts]
 * @param {{page?: string, ready?: string}} [which]  the page, and the global it sets when ready
 */
export async function openPage(modelsFolder, extraMounts = {}, { page: pagePath = '/web/index.html', ready = 'gpt2onnx' } = {}) {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install chromium (or set CHROMIUM)`);
  const server = await startStaticServer({ '/': PACKAGE_ROOT, '/models/': modelsFolder, ...extraMounts });
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'], // root in CI; no GPU here
  });
  /** @type {string[]} */
  const console_ = [];
  try {
    const page = await browser.newPage();
    page.on('console', (message) => console_.push(`${message.type()}: ${message.text()}`));
    page.on('pageerror', (error) => console_.push(`pageerror: ${error}`));
    await page.setViewport({ width: 1100, height: 900 });
    // Nothing but the local server may be reached (no CDN, no hub).
    page.on('request', (request) => {
      const url = request.url();
      if (!url.startsWith(server.url) && !url.startsWith(`blob:${server.url}`)) console_.push(`request outside the local server: ${url}`);
    });
    await page.goto(`${server.url}${pagePath}`, { waitUntil: 'load' });
    await page.waitForFunction((name) => /** @type {any} */ (window)[name]?.ready, { timeout: 30_000 }, ready);
    return {
      page,
      server,
      console: console_,
      /** @param {{model: string, prompt: string, maxNewTokens: number}} spec */
      generate: (spec) => page.evaluate((s) => /** @type {any} */ (window).gpt2onnx.generate(s), spec),
      /** @param {string} model */
      forget: (model) => page.evaluate((m) => /** @type {any} */ (window).gpt2onnx.forget(m), model),
      close: async () => {
        await browser.close();
        await server.close();
      },
    };
  } catch (error) {
    await browser.close();
    await server.close();
    throw new Error(`${error}\nbrowser console:\n${console_.join('\n')}`);
  }
}
