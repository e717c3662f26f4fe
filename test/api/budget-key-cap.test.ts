import assert from 'node:assert/strict';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { account, discardQueuedRentalJobs, rent, rentOk } from '../helpers/rentals.js';

/** A budget and the key's per-rental cap, as an agent meets them over HTTP: never a silent cut. */
describe("budgetMinor against the key's per-rental cap", () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext();
  });
  after(async () => {
    await discardQueuedRentalJobs(ctx);
    await ctx.close();
  });

  it('refuses a budget above the cap with 403 KEY_LIMIT_EXCEEDED naming both amounts, the unit and the next step, and admits one at the cap', async () => {
    const who = await account(ctx, { maxPerRentalMinor: 500, creditsMinor: 5000 });
    const over = await rent(ctx, who, { gpuModel: 'H100', gpuCount: 1, maxHourlyPriceMinor: 1000, budgetMinor: 1000 });
    assert.equal(over.status, 403, JSON.stringify(over.body));
    assert.equal(over.body.error.code, 'KEY_LIMIT_EXCEEDED');
    assert.equal(
      over.body.error.message,
      "budgetMinor 1000 ($10.00) is above this key's per-rental cap, maxPerRentalMinor 500 ($5.00), in USD cents; nothing was started. " +
        'Next: send budgetMinor of at most 500, leave it out to stop at the cap, or ask the account owner for a key with a higher cap.',
    );
    const list = await ctx.api.get('/api/v1/rentals').set(who.auth);
    assert.equal(list.body.data.length, 0);

    const atCap = await rentOk(ctx, who, {
      gpuModel: 'H100',
      gpuCount: 1,
      maxHourlyPriceMinor: 1000,
      budgetMinor: 500,
    });
    assert.equal((atCap.deployment as { spendCapMinor: number }).spendCapMinor, 500);
  });

  it("without a budget the rental carries the key's cap as its spendCapMinor", async () => {
    const who = await account(ctx, { maxPerRentalMinor: 700, creditsMinor: 5000 });
    const r = await rentOk(ctx, who, { gpuModel: 'H100', gpuCount: 1, maxHourlyPriceMinor: 1000 });
    assert.equal((r.deployment as { spendCapMinor: number }).spendCapMinor, 700);
  });
});
