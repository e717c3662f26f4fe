import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { startBrowserSite } from '../helpers/browser.js';
import type { TestContext } from '../helpers/context.js';

describe('Approving an agent with an owner key in the browser', function () {
  this.timeout(60_000);
  let ctx: TestContext;
  let closeSite: (() => Promise<void>) | undefined;
  let base: string;
  let browser: Browser;
  let ownerToken: string;

  before(async () => {
    ({ ctx, base, browser, close: closeSite } = await startBrowserSite({ AGENT_SETUP_RATE_PER_MINUTE: '100000' }));
    ({ token: ownerToken } = await ctx.services.accounts.createOwner({
      name: 'browser owner',
      scopes: ['read', 'rent', 'manage', 'billing'],
      isAdmin: false,
      maxPerRentalMinor: 100_000,
      budgetLimitMinor: 1_000_000,
      maxConcurrentDeployments: 10,
    }));
  });

  after(async () => {
    await closeSite?.();
  });

  async function begin(name?: string): Promise<{ approvalUrl: string; setupCode: string }> {
    const res = await fetch(`${base}/api/v1/agent-authorizations`, {
      method: 'POST',
      ...(name ? { headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name }) } : {}),
    });
    assert.equal(res.status, 200);
    return ((await res.json()) as { data: { approvalUrl: string; setupCode: string } }).data;
  }

  const exchange = (setupCode: string) =>
    fetch(`${base}/api/v1/agent-setups/exchange`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ setupCode }),
    });

  it('the owner fills in the limits and pastes the key; the agent then gets its key with those limits', async () => {
    const { approvalUrl, setupCode } = await begin('render-bot');
    assert.equal((await exchange(setupCode)).status, 409);
    const page = await browser.newPage();
    try {
      await page.goto(approvalUrl);
      assert.match(await page.locator('main').innerText(), /calls itself render-bot/);
      await page.getByLabel('Per rental (USD)').fill('12.50');
      await page.getByLabel('In total (USD)').fill('80');
      await page.getByLabel('Machines at once').fill('2');
      await page.getByLabel('Your owner key').fill(ownerToken);
      await Promise.all([page.waitForURL(approvalUrl), page.getByRole('button', { name: 'Approve' }).click()]);
      assert.equal(await page.locator('h1').innerText(), 'Agent approved');
      const text = await page.locator('main').innerText();
      assert.match(text, /\$12\.50/);
      assert.match(text, /\$80\.00/);
      assert.doesNotMatch(await page.content(), new RegExp(ownerToken.split('.')[1]), 'the pasted key is never echoed');
    } finally {
      await page.close();
    }
    const res = await exchange(setupCode);
    assert.equal(res.status, 200);
    const { key, token } = ((await res.json()) as { data: { key: Record<string, unknown>; token: string } }).data;
    assert.match(token, /^gpr_/);
    assert.deepEqual(
      [key.name, key.maxPerRentalMinor, key.budgetLimitMinor, key.maxConcurrentDeployments, key.kind],
      ['render-bot', 1250, 8000, 2, 'AGENT'],
    );
  });

  it('shows what is wrong and keeps the form when the limits or the key are refused', async () => {
    const { approvalUrl, setupCode } = await begin();
    const page = await browser.newPage();
    try {
      await page.goto(approvalUrl);
      // The browser's own checks are bypassed, so the server's (the API's bounds) answer.
      await page.locator('form').evaluate((f) => f.setAttribute('novalidate', ''));
      await page.getByLabel('Per rental (USD)').fill('4.99');
      await page.getByLabel('Your owner key').fill(ownerToken);
      await page.getByRole('button', { name: 'Approve' }).click();
      await page.waitForLoadState();
      assert.match(
        await page.getByRole('alert').innerText(),
        /the per-rental limit must be from \$5\.00 to \$100,000\.00/,
      );
      await page.getByLabel('Your owner key').fill('gpr_AAAAAAAA.' + 'x'.repeat(43));
      await page.getByRole('button', { name: 'Approve' }).click();
      await page.waitForLoadState();
      assert.match(await page.getByRole('alert').innerText(), /owner key was not accepted/);
    } finally {
      await page.close();
    }
    assert.equal((await exchange(setupCode)).status, 409, 'still pending');
  });
});
