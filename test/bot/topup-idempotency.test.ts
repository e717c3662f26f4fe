import assert from 'node:assert/strict';
import { Account } from '../../src/modules/accounts/account.entity.js';
import { Checkout } from '../../src/modules/billing/checkout.entity.js';
import { buttonsOf } from '../fakes/telegram-api.js';
import { addKey } from '../helpers/rentals.js';
import { createBotHarness, telegramId, type BotHarness } from './harness.js';

describe("the bot's top-up idempotency keys", () => {
  let h: BotHarness;
  before(async () => {
    h = await createBotHarness();
  });
  after(() => h.close());

  it('cannot be claimed in advance by a key of the account with billing', async () => {
    const owner = h.owner(telegramId(), 'Ada');
    await owner.send('/start');
    const account = await h.ctx.services.ds.getRepository(Account).findOneByOrFail({ telegramUserId: owner.id });
    const agent = await addKey(h.ctx, account.id, { scopes: ['read', 'rent', 'billing'] });
    // Update ids are small consecutive numbers: claim the next hundred as the bot used to name them.
    const next = h.fake.makeUpdate({}).update_id;
    for (let id = next; id < next + 100; id += 1) {
      const res = await h.ctx.api
        .post('/api/v1/billing/topups')
        .set(agent.auth)
        .set('Idempotency-Key', `telegram-update-${id}`)
        .send({ amountMinor: 500 });
      assert.equal(res.status, 201, JSON.stringify(res.body));
    }
    const [link] = await owner.send('/topup 20');
    assert.match(link.text, /Payment link for <b>\$20\.00|Payment link for \$20\.00/);
    const url = buttonsOf(link)[0]?.url;
    assert.ok(url, 'a payment button');
    const mine = await h.ctx.services.ds
      .getRepository(Checkout)
      .findOneByOrFail({ id: new URL(url).pathname.split('/').pop()! });
    assert.equal(mine.amountMinor, 2000);
    assert.equal(mine.keyId, null, "the owner's own link, not one the agent made");
  });
});
