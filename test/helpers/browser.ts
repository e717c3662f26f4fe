import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser } from 'playwright-core';
import { createTestContext, type TestContext } from './context.js';

const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

export interface BrowserSite {
  ctx: TestContext;
  /** Where the app listens; also its PUBLIC_BASE_URL, so the links it hands out work in the browser. */
  base: string;
  browser: Browser;
  close(): Promise<void>;
}

/** The app on a real port and Debian's Chromium to drive it. */
export async function startBrowserSite(env: Record<string, string> = {}): Promise<BrowserSite> {
  // The port must be known before the context is built, so the links it hands out point at it.
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const ctx = await createTestContext({ env: { PUBLIC_BASE_URL: base, ...env } });
  server.on('request', ctx.app);
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: CHROMIUM_ARGS });
  return {
    ctx,
    base,
    browser,
    async close() {
      await browser.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await ctx.close();
    },
  };
}
