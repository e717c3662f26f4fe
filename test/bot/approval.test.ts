import assert from 'node:assert/strict';
import { Account } from '../../src/modules/accounts/account.entity.js';
import { buttonsOf } from '../fakes/telegram-api.js';
import { callbackAnswers, createBotHarness, edits, sentMessages, telegramId, type BotHarness } from './harness.js';

describe('Telegram approval of agent authorizations (deep link)', () => {
  let h: BotHarness;
  before(async () => {
    h = await createBotHarness();
  });
  after(() => h.close());

  /** An agent opens an authorization session; returns its private setup code and public approval code. */
  async function begin(): Promise<{ setupCode: string; approvalCode: string }> {
    const res = await h.ctx.api.post('/api/v1/agent-authorizations');
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const values = Object.values(res.body.data).filter((v): v is string => typeof v === 'string');
    const setupCode = values.find((v) => /^gps_[A-Za-z0-9_-]{43}$/.test(v));
    const approvalUrl = values.find((v) => v.startsWith('http://gpu.test/approve/'));
    assert.ok(setupCode && approvalUrl, JSON.stringify(res.body.data));
    const approvalCode = decodeURIComponent(approvalUrl.slice('http://gpu.test/approve/'.length));
    assert.match(approvalCode, /^gpa_[A-Za-z0-9_-]{43}$/);
    return { setupCode, approvalCode };
  }

  const exchange = (setupCode: string) => h.ctx.api.post('/api/v1/agent-setups/exchange').send({ setupCode });

  it('shows the pending request, takes the limits, approves on confirmation; the agent then exchanges once', async () => {
    const { setupCode, approvalCode } = await begin();
    const pending = await exchange(setupCode);
    assert.equal(pending.status, 409);
    assert.equal(pending.body.error.code, 'AGENT_AUTHORIZATION_PENDING');

    const owner = h.owner(telegramId(), 'Grace');
    const [intro, q1] = await owner.send(`/start approve_${approvalCode}`);
    assert.match(intro.text, /An agent asks to connect to your account/);
    assert.match(intro.text, /expires at \d{4}-\d\d-\d\d \d\d:\d\d UTC \(10 minutes\)/);
    assert.match(q1.text, /Step 1 of 5/);

    const q2 = sentMessages(await owner.pressButton(q1, '$25'))[0];
    assert.deepEqual(
      buttonsOf(q2)
        .map((b) => b.text)
        .slice(0, 5),
      ['$50', '$100', '$250', '$500', '$1,000'],
    );
    const [q3] = await owner.send('120');
    const q4 = sentMessages(await owner.pressButton(q3, '3'))[0];
    assert.match(q4.text, /Step 4 of 5/);
    const q5 = sentMessages(await owner.pressButton(q4, '8 h'))[0];
    assert.match(q5.text, /Step 5 of 5/);
    const confirm = sentMessages(await owner.pressButton(q5, '1 h'))[0];
    assert.match(
      confirm.text,
      /Approve this agent with \$25\.00 per rental, \$120\.00 in total, 3 rentals at a time, each for up to 8 hours, stops after 1 h idle\?/,
    );
    assert.equal((await exchange(setupCode)).status, 409, 'not approved before the owner confirms');
    assert.match(await owner.say('yes'), /use the Approve or Cancel button/);

    const calls = await owner.pressButton(confirm, 'Approve');
    assert.match(edits(calls)[0], /^Approved\./);

    const res = await exchange(setupCode);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const me = await h.ctx.api.get('/api/v1/me').set('Authorization', `Bearer ${res.body.data.token}`);
    assert.equal(me.status, 200);
    const account = await h.ctx.services.ds.getRepository(Account).findOneByOrFail({ telegramUserId: owner.id });
    assert.equal(me.body.data.user.id, account.id);
    assert.equal(me.body.data.key.kind, 'AGENT');
    assert.equal(me.body.data.key.maxPerRentalMinor, 2500);
    assert.equal(me.body.data.key.budgetLimitMinor, 12000);
    assert.equal(me.body.data.key.maxConcurrentDeployments, 3);
    assert.equal(me.body.data.key.maxRentalSeconds, 8 * 3600);
    assert.equal(me.body.data.key.idleTerminateMinutes, 60);
    assert.ok(!me.body.data.key.scopes.includes('billing'));
    assert.equal((await exchange(setupCode)).status, 409, 'exchanged once');

    // The link again, and the old confirmation button, say it is done.
    assert.match(await owner.say(`/start approve_${approvalCode}`), /already approved|can no longer be approved/);
    assert.match(callbackAnswers(await owner.pressButton(confirm, 'Approve'))[0], /no longer open/);
  });

  it('says plainly when the link is malformed or the request expired, including mid-dialogue', async () => {
    const owner = h.owner(telegramId());
    assert.match(await owner.say('/start approve_nonsense'), /not valid/);
    assert.match(await owner.say(`/start approve_gpa_${'x'.repeat(43)}`), /No request matches/);

    const late = await begin();
    const [, q1] = await owner.send(`/start approve_${late.approvalCode}`);
    await owner.pressButton(q1, '$5');
    const [q3] = await owner.send('50');
    await owner.pressButton(q3, '1');
    await owner.send('none');
    const [confirm] = await owner.send('none');
    assert.match(confirm.text, /no time limit per rental, idle rentals not stopped\?/);
    h.ctx.clock.advance(11 * 60_000);
    assert.match(callbackAnswers(await owner.pressButton(confirm, 'Approve'))[0], /no longer open/);
    assert.equal((await exchange(late.setupCode)).body.error.code, 'AGENT_SETUP_INVALID');

    const expired = await begin();
    h.ctx.clock.advance(11 * 60_000);
    assert.match(await owner.say(`/start approve_${expired.approvalCode}`), /expired/);
  });
});
