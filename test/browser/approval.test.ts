import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { startBrowserSite } from '../helpers/browser.js';
import type { TestContext } from '../helpers/context.js';

describe('Agent approval page in a browser', function () {
  this.timeout(60_000);
  let ctx: TestContext;
  let closeSite: (() => Promise<void>) | undefined;
  let base: string;
  let browser: Browser;

  before(async () => {
    ({ ctx, base, browser, close: closeSite } = await startBrowserSite({ TELEGRAM_BOT_USERNAME: 'gpu_owner_bot' }));
  });

  after(async () => {
    await closeSite?.();
  });

  async function begin(): Promise<{ approvalUrl: string; expiresAt: string }> {
    const res = await fetch(`${base}/api/v1/agent-authorizations`, { method: 'POST' });
    assert.equal(res.status, 200);
    return ((await res.json()) as { data: { approvalUrl: string; expiresAt: string } }).data;
  }

  it('shows the request, the limits the owner will set, its expiry and the Telegram button', async () => {
    const { approvalUrl, expiresAt } = await begin();
    assert.ok(approvalUrl.startsWith(`${base}/approve/gpa_`));
    const page = await browser.newPage();
    try {
      await page.goto(approvalUrl);
      assert.equal(await page.locator('h1').innerText(), 'An agent asks for access');
      const text = await page.locator('main').innerText();
      assert.match(text, /Per rental/);
      assert.match(text, /In total/);
      assert.match(text, /At once/);
      assert.match(text, new RegExp(`Expires ${expiresAt.slice(0, 16).replace('T', ' ')} UTC`));
      const button = page.getByRole('link', { name: 'Approve in Telegram' });
      assert.equal(await button.isVisible(), true);
      const code = approvalUrl.slice(approvalUrl.lastIndexOf('/') + 1);
      assert.equal(await button.getAttribute('href'), `https://t.me/gpu_owner_bot?start=approve_${code}`);
      assert.match(await page.locator('pre').innerText(), /agent-authorizations\/approve/);
    } finally {
      await page.close();
    }
  });

  it('tells the owner plainly when the request has expired', async () => {
    const { approvalUrl } = await begin();
    ctx.clock.advance(10 * 60 * 1000 + 1);
    const page = await browser.newPage();
    try {
      const res = await page.goto(approvalUrl);
      assert.equal(res?.status(), 410);
      assert.equal(await page.locator('h1').innerText(), 'This request has expired');
      assert.equal(await page.getByRole('link', { name: 'Approve in Telegram' }).count(), 0);
    } finally {
      await page.close();
    }
  });
});
