import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { callbackAnswers, createBotHarness, edits, sentMessages, telegramId, type BotHarness } from './harness.js';

const TOKEN_RE = /gpr_[A-Za-z0-9]{8}\.[A-Za-z0-9_-]{43}/;

describe('/ownerkeys in the Telegram bot', () => {
  let h: BotHarness;
  before(async () => {
    h = await createBotHarness();
  });
  after(() => h.close());

  const me = (token: string) => h.ctx.api.get('/api/v1/me').set('Authorization', `Bearer ${token}`);

  it('lists OWNER keys; Revoke (confirmed) refuses the key and the agent keys it issued', async () => {
    const owner = h.owner(telegramId());
    const token = TOKEN_RE.exec(await owner.say('/ownerkey'))![0];
    const issued = await h.ctx.api
      .post('/api/v1/agent-keys')
      .set('Authorization', `Bearer ${token}`)
      .set('Idempotency-Key', randomUUID())
      .send({
        name: 'script agent',
        scopes: ['read'],
        maxPerRentalMinor: 500,
        budgetLimitMinor: 500,
        maxConcurrentDeployments: 1,
      });
    assert.equal(issued.status, 201, JSON.stringify(issued.body));

    const [list] = await owner.send('/ownerkeys');
    assert.match(list.text, /OWNER API keys/);
    assert.match(list.text, new RegExp(token.slice(4, 12)));
    const [confirm] = sentMessages(await owner.pressButton(list, /^Revoke 1\./));
    assert.match(confirm.text, /every agent key it issued/);
    assert.equal((await me(token)).status, 200, 'nothing happens before the confirmation');

    const calls = await owner.pressButton(confirm, 'Yes, revoke it');
    assert.match(edits(calls)[0], /^Revoked\. .*1 agent key/);
    assert.equal((await me(token)).status, 401);
    assert.equal((await me(issued.body.data.token)).status, 401);
    assert.match(await owner.say('/ownerkeys'), /no active OWNER API keys/);
  });

  it("refuses a forged Revoke for another owner's key, which keeps working", async () => {
    const victim = h.owner(telegramId());
    const token = TOKEN_RE.exec(await victim.say('/ownerkey'))![0];
    const [victimList] = await victim.send('/ownerkeys');
    const data = /ork:([0-9a-f-]{36})/.exec(JSON.stringify(victimList))![1];
    const attacker = h.owner(telegramId());
    const [msg] = await attacker.send('/help');
    for (const forged of [`ork:${data}`, `orky:${data}`]) {
      assert.match(callbackAnswers(await attacker.press(msg, forged))[0], /not on your account/);
    }
    assert.equal((await me(token)).status, 200);
  });
});
