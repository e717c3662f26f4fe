import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Browser } from 'playwright-core';
import { startBrowserSite } from '../helpers/browser.js';

/** The fields of API answers this test reads. */
interface ApiData {
  token: string;
  paymentUrl: string;
  creditsMinor: number;
  entries: { kind: string; reference: string }[];
  [field: string]: unknown;
}

describe('Development checkout in a browser', function () {
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

  async function api(
    path: string,
    init: { method?: string; token?: string; body?: unknown; idempotencyKey?: string } = {},
  ) {
    const headers: Record<string, string> = {};
    if (init.token) headers.Authorization = `Bearer ${init.token}`;
    if (init.idempotencyKey) headers['Idempotency-Key'] = init.idempotencyKey;
    if (init.body !== undefined) headers['Content-Type'] = 'application/json';
    const res = await fetch(`${base}${path}`, {
      method: init.method ?? 'GET',
      headers,
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    });
    return { status: res.status, body: (await res.json()) as { data: ApiData } };
  }

  it('opens the top-up link, pays with one click, and the balance rises', async () => {
    const signed = await api('/api/v1/signup', { method: 'POST', idempotencyKey: randomUUID(), body: {} });
    assert.equal(signed.status, 201);
    const token: string = signed.body.data.token;

    const created = await api('/api/v1/billing/topups', {
      method: 'POST',
      token,
      idempotencyKey: randomUUID(),
      body: { amountMinor: 1500 },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const { paymentUrl, topupId } = created.body.data;
    assert.ok(paymentUrl.startsWith(`${base}/pay/`), paymentUrl);

    const page = await browser.newPage();
    try {
      await page.goto(paymentUrl);
      assert.equal(await page.title(), 'Pay for compute');
      assert.match(await page.locator('[role="note"]').innerText(), /Development payment page/);
      assert.equal(await page.locator('#amount').innerText(), '$15.00');
      const pay = page.getByRole('button', { name: 'Pay $15.00' });
      await Promise.all([page.waitForURL(`${base}/checkout/${topupId}/success`), pay.click()]);
      assert.equal(await page.getByRole('heading', { level: 1 }).innerText(), 'Payment received');
      assert.match(await page.locator('main').innerText(), /\$15\.00 of compute credits were added to the account/);
    } finally {
      await page.close();
    }

    const balance = await api('/api/v1/billing/balance', { token });
    assert.equal(balance.status, 200);
    assert.equal(balance.body.data.creditsMinor, 1500);
    assert.equal(balance.body.data.entries[0].kind, 'TOPUP');
    assert.equal(balance.body.data.entries[0].reference, `topup:${topupId}`);
  });

  it('lets the human cancel and says nothing was charged', async () => {
    const signed = await api('/api/v1/signup', { method: 'POST', idempotencyKey: randomUUID(), body: {} });
    const token: string = signed.body.data.token;
    const created = await api('/api/v1/billing/topups', {
      method: 'POST',
      token,
      idempotencyKey: randomUUID(),
      body: { amountMinor: 700 },
    });
    const page = await browser.newPage();
    try {
      await page.goto(created.body.data.paymentUrl);
      await Promise.all([page.waitForURL(/\/cancel$/), page.getByRole('link', { name: 'Cancel' }).click()]);
      assert.equal(await page.getByRole('heading', { level: 1 }).innerText(), 'Payment cancelled');
      assert.match(await page.locator('main').innerText(), /Nothing was charged/);
    } finally {
      await page.close();
    }
    const balance = await api('/api/v1/billing/balance', { token });
    assert.equal(balance.body.data.creditsMinor, 0);
  });
});
