import assert from 'node:assert/strict';
import { Account } from '../../src/modules/accounts/account.entity.js';
import { createBotHarness, telegramId, type BotHarness } from './harness.js';

describe('the name an agent gives itself, in the bot', () => {
  let h: BotHarness;
  before(async () => {
    h = await createBotHarness();
  });
  after(() => h.close());

  it('is shown on the approval deep link and, once approved, in /agents', async () => {
    const begun = await h.ctx.api.post('/api/v1/agent-authorizations').send({ name: 'nightly <trainer>' });
    assert.equal(begun.status, 200, JSON.stringify(begun.body));
    const approvalCode = begun.body.data.approvalUrl.split('/').pop();
    const owner = h.owner(telegramId(), 'Hedy');
    const [intro] = await owner.send(`/start approve_${approvalCode}`);
    assert.match(intro.text, /calls itself “nightly <trainer>”/);
    await owner.say('/cancel');

    const account = await h.ctx.services.ds.getRepository(Account).findOneByOrFail({ telegramUserId: owner.id });
    await h.ctx.services.agents.approveAuthorization({ accountId: account.id, keyId: null }, approvalCode, {
      maxPerRentalMinor: 500,
      budgetLimitMinor: 500,
      maxConcurrentDeployments: 1,
    });
    const exchanged = await h.ctx.api
      .post('/api/v1/agent-setups/exchange')
      .send({ setupCode: begun.body.data.setupCode });
    assert.equal(exchanged.status, 200);
    const [agents] = await owner.send('/agents');
    assert.match(agents.text, /nightly <trainer>/);
  });
});
