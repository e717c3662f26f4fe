import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { startBrowserSite } from '../helpers/browser.js';

describe('API reference page in a browser, under its Content-Security-Policy', function () {
  this.timeout(60_000);
  let closeSite: (() => Promise<void>) | undefined;
  let base: string;
  let browser: Browser;

  before(async () => {
    ({ base, browser, close: closeSite } = await startBrowserSite());
  });

  after(async () => {
    await closeSite?.();
  });

  it('renders every operation with no policy violation', async () => {
    const page = await browser.newPage();
    const violations: string[] = [];
    page.on('console', (m) => {
      if (/Content Security Policy|Refused to/i.test(m.text())) violations.push(m.text());
    });
    await page.goto(`${base}/docs`);
    await page.waitForSelector('.opblock-summary-operation-id, .opblock-summary-path', { timeout: 20_000 });
    assert.match(await page.locator('.info').innerText(), /Quickstart/);
    const paths = await page.locator('.opblock-summary-path').allInnerTexts();
    assert.ok(
      paths.some((p) => p.includes('/api/v1/rentals')),
      paths.join(' '),
    );
    assert.deepEqual(violations, []);
  });

  it('cannot be framed by another page', async () => {
    const page = await browser.newPage();
    // A data: page is another origin: the browser must refuse to show /docs inside it. The parent's
    // load event waits for the frame, whether it loaded the page or the browser's error page.
    await page.goto(`data:text/html,<iframe src="${base}/docs"></iframe>`, { waitUntil: 'load' });
    const frame = await (await page.$('iframe'))!.contentFrame();
    assert.ok(frame);
    assert.equal(await frame.locator('#swagger-ui').count(), 0, 'nothing of the page rendered in the frame');
    assert.notEqual(frame.url(), `${base}/docs`);
  });
});
