import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Account } from '../../src/modules/accounts/account.entity.js';
import { ApiKey } from '../../src/modules/keys/api-key.entity.js';
import { buttonsOf } from '../fakes/telegram-api.js';
import {
  callbackAnswers,
  createBotHarness,
  edits,
  sentMessages,
  setupCodeIn,
  telegramId,
  type BotHarness,
} from './harness.js';

describe('Telegram owner bot', () => {
  let h: BotHarness;
  before(async () => {
    h = await createBotHarness();
  });
  after(() => h.close());

  async function exchange(setupCode: string) {
    return h.ctx.api.post('/api/v1/agent-setups/exchange').send({ setupCode });
  }

  describe('/start', () => {
    it('creates the owner account bound to the Telegram user once, and explains what the bot does', async () => {
      const owner = h.owner(telegramId(), 'Ada');
      const text = await owner.say('/start');
      assert.match(text, /Welcome, Ada\./);
      assert.match(text, /agents rent GPU machines/);
      assert.match(text, /\/newagent/);
      assert.match(text, /Credits: \$0\.00/);
      await owner.say('/start');
      const accounts = await h.ctx.services.ds.getRepository(Account).findBy({ telegramUserId: owner.id });
      assert.equal(accounts.length, 1);
      assert.equal(accounts[0].telegramChatId, owner.id);
    });
  });

  describe('/newagent', () => {
    it('in one line: answers with a one-time setup code, its expiry and the exchange call; the key works and carries the limits', async () => {
      const owner = h.owner(telegramId());
      const text = await owner.say('/newagent 5 50 1');
      const code = setupCodeIn(text);
      assert.match(
        text,
        /\$5\.00 per rental, \$50\.00 in total, 1 rental at a time, no time limit per rental, idle rentals not stopped/,
      );
      assert.match(text, /Valid for one exchange until \d{4}-\d\d-\d\d \d\d:\d\d UTC \(10 minutes\)/);
      assert.ok(text.includes(`curl -s -X POST http://gpu.test/api/v1/agent-setups/exchange`), text);
      assert.ok(text.includes(`-d '{"setupCode":"${code}"}'`), text);

      const res = await exchange(code);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const token: string = res.body.data.token;
      const me = await h.ctx.api.get('/api/v1/me').set('Authorization', `Bearer ${token}`);
      assert.equal(me.status, 200, JSON.stringify(me.body));
      assert.equal(me.body.data.key.kind, 'AGENT');
      assert.deepEqual([...me.body.data.key.scopes].sort(), ['manage', 'read', 'rent']);
      assert.equal(me.body.data.key.maxPerRentalMinor, 500);
      assert.equal(me.body.data.key.budgetLimitMinor, 5000);
      assert.equal(me.body.data.key.maxConcurrentDeployments, 1);
      assert.equal(me.body.data.key.maxRentalSeconds, null);
      assert.equal(me.body.data.key.idleTerminateMinutes, null);
      const account = await h.ctx.services.ds.getRepository(Account).findOneByOrFail({ telegramUserId: owner.id });
      assert.equal(me.body.data.user.id, account.id, 'the agent works on the owner account');

      // Shown once and used once.
      const again = await exchange(code);
      assert.equal(again.status, 409);
      assert.equal(again.body.error.code, 'AGENT_SETUP_INVALID');
      const stored = await h.ctx.services.ds.query(
        'SELECT COUNT(*) AS n FROM telegram_conversations WHERE chat_id = ?',
        [owner.id],
      );
      assert.equal(Number(stored[0].n), 0);
    });

    it('refuses limits under the minimums and malformed numbers, naming each, and creates nothing', async () => {
      const owner = h.owner(telegramId());
      const text = await owner.say('/newagent 4.99 2 0');
      assert.match(text, /The per-rental cap must be at least \$5\.00; you sent \$4\.99\./);
      assert.match(text, /The total cap must be at least \$5\.00; you sent \$2\.00\./);
      assert.match(text, /The number of concurrent rentals must be at least 1; you sent 0\./);
      assert.match(text, /Nothing was created/);
      assert.doesNotMatch(text, /gps_/);
      assert.match(
        await owner.say('/newagent five 50 1'),
        /Per-rental cap: "five" is not an amount in US dollars: write dollars like 12\.50\./,
      );
      assert.match(await owner.say('/newagent 5 50'), /Send all three limits in one line/);
      assert.match(await owner.say('/newagent 5 50 1.5'), /Concurrent rentals: "1\.5" is not a whole number\./);
      assert.match(await owner.say('/newagent 5 50000000 1'), /The total cap can be at most \$100,000\.00/);
    });

    it('says plainly that agent creation is switched off, without suggesting a retry', async () => {
      const off = await createBotHarness({ env: { AGENT_V1_ENABLED: 'false' } });
      try {
        const text = await off.owner(telegramId()).say('/newagent 5 50 1');
        assert.match(text, /Agent creation is switched off on this service/);
        assert.doesNotMatch(text, /try again|gps_/i);
      } finally {
        await off.close();
      }
    });

    it('asks step by step with preset buttons and typed amounts, and the dialogue survives a bot restart', async () => {
      const owner = h.owner(telegramId());
      const intro = await owner.send('/newagent');
      assert.equal(intro.length, 2);
      const q1 = intro[1];
      assert.match(q1.text, /Step 1 of 5\. What may one rental cost at most\?/);
      assert.deepEqual(
        buttonsOf(q1).map((b) => b.text),
        ['$5', '$10', '$25', '$50', '$100', 'Cancel'],
      );

      let calls = await owner.pressButton(q1, '$10');
      assert.deepEqual(edits(calls), ['Per-rental cap: $10.00']);
      const q2 = sentMessages(calls)[0];
      assert.match(q2.text, /Step 2 of 5\. How much may the agent spend in total/);

      // Pressing an answered question's button again changes nothing.
      calls = await owner.pressButton(q1, '$25');
      assert.deepEqual(callbackAnswers(calls), ['That question was already answered.']);
      assert.deepEqual(sentMessages(calls), []);

      // A typed amount under the minimum is refused with the reason; a good one is taken.
      assert.match(
        await owner.say('3'),
        /The total cap must be at least \$5\.00; you sent \$3\.00\. Or \/cancel to stop\./,
      );
      assert.match(await owner.say('lots'), /Please send an amount in US dollars: write dollars like 12\.50\./);

      await h.restartBot();
      const q3 = await owner.send('$75.50');
      assert.equal(q3.length, 1);
      assert.match(q3[0].text, /Step 3 of 5\. How many rentals may run at the same time\?/);

      calls = await owner.pressButton(q3[0], '2');
      const q4 = sentMessages(calls)[0];
      assert.match(q4.text, /Step 4 of 5\. How long may one rental run at most\?/);
      assert.deepEqual(
        buttonsOf(q4).map((b) => b.text),
        ['1 h', '4 h', '8 h', '24 h', '3 days', 'No limit', 'Cancel'],
      );
      assert.match(
        await owner.say('8'),
        /Please send a length such as 8h, 90m or 2d, or "none" for no limit\. Or \/cancel to stop\./,
      );
      assert.match(await owner.say('31d'), /The longest rental must be from 1 minute to 30 days; you sent 31 days\./);
      const [q5] = await owner.send('1h 30m');
      assert.match(q5.text, /Step 5 of 5\. How long may a rental's GPUs sit idle/);
      assert.deepEqual(
        buttonsOf(q5).map((b) => b.text),
        ['15 min', '30 min', '1 h', '2 h', 'No limit', 'Cancel'],
      );
      assert.match(
        await owner.say('later'),
        /Please send minutes such as 45, a length such as 2h, or "none" for no limit\. Or \/cancel to stop\./,
      );
      assert.match(await owner.say('2d'), /The idle time must be from 1 min to 24 h; you sent 48 h\./);
      const done = await owner.send('45');
      assert.equal(done.length, 1);
      assert.match(
        done[0].text,
        /\$10\.00 per rental, \$75\.50 in total, 2 rentals at a time, each for up to 1 hour 30 minutes, stops after 45 min idle/,
      );
      const res = await exchange(setupCodeIn(done[0].text));
      assert.equal(res.status, 200);
      const me = await h.ctx.api.get('/api/v1/me').set('Authorization', `Bearer ${res.body.data.token}`);
      assert.equal(me.body.data.key.maxPerRentalMinor, 1000);
      assert.equal(me.body.data.key.budgetLimitMinor, 7550);
      assert.equal(me.body.data.key.maxConcurrentDeployments, 2);
      assert.equal(me.body.data.key.maxRentalSeconds, 5400);
      assert.equal(me.body.data.key.idleTerminateMinutes, 45);

      // The finished dialogue's keyboard is dead.
      calls = await owner.pressButton(q3[0], '3');
      assert.match(callbackAnswers(calls)[0], /no longer open/);
    });

    it('mints one code when the last button is pressed twice at once', async () => {
      const owner = h.owner(telegramId());
      const [, q1] = await owner.send('/newagent');
      await owner.pressButton(q1, '$5');
      const [q3] = await owner.send('50');
      const q4 = sentMessages(await owner.pressButton(q3, '1'))[0];
      const q5 = sentMessages(await owner.pressButton(q4, 'No limit'))[0];
      const calls5 = await owner.pressButton(q5, '30 min');
      assert.deepEqual(edits(calls5), ['Stop when idle: 30 min']);
      const code = sentMessages(calls5).find((m) => /gps_/.test(m.text))!;
      assert.match(code.text, /no time limit per rental, stops after 30 min idle/);
      const [, r1] = await owner.send('/newagent');
      await owner.pressButton(r1, '$5');
      const [r3] = await owner.send('50');
      const r4 = sentMessages(await owner.pressButton(r3, '1'))[0];
      const r5 = sentMessages(await owner.pressButton(r4, 'No limit'))[0];
      const mark = h.fake.mark();
      await Promise.all([owner.pressButton(r5, 'No limit'), owner.pressButton(r5, 'No limit')]);
      const calls = h.fake.callsSince(mark);
      assert.equal(sentMessages(calls).filter((m) => /gps_/.test(m.text)).length, 1);
      const answers = callbackAnswers(calls).sort();
      assert.equal(answers.length, 2);
      assert.equal(answers[0], '');
      assert.match(answers[1], /already answered|no longer open/);
    });

    it('can be cancelled by button or /cancel', async () => {
      const owner = h.owner(telegramId());
      const [, q1] = await owner.send('/newagent');
      const calls = await owner.pressButton(q1, 'Cancel');
      assert.deepEqual(edits(calls), ['Cancelled. Nothing was created.']);
      assert.match(await owner.say('/cancel'), /nothing to cancel/);
      await owner.send('/newagent');
      assert.match(await owner.say('/cancel'), /Cancelled/);
      assert.match(await owner.say('10'), /didn't understand/);
    });
  });

  describe('end to end', () => {
    it('an owner tops up and connects an agent in the chat; the agent rents with its key; the owner sees and terminates the rental', async () => {
      const owner = h.owner(telegramId(), 'Linus');
      await owner.send('/start');
      const [link] = await owner.send('/topup 20');
      const payUrl = buttonsOf(link)[0].url!;
      assert.equal((await h.ctx.api.post(new URL(payUrl).pathname)).status, 303);

      const code = setupCodeIn(await owner.say('/newagent 5 50 1 trainer'));
      const exchanged = await exchange(code);
      assert.equal(exchanged.status, 200, JSON.stringify(exchanged.body));
      const auth = { Authorization: `Bearer ${exchanged.body.data.token}` };

      const offers = await h.ctx.api.get('/api/v1/offers');
      const offer = offers.body.data.find((o: { pricePerHourMinor: number }) => o.pricePerHourMinor <= 500);
      assert.ok(offer, 'an offer within the $5 per-rental cap');
      const rent = await h.ctx.api
        .post('/api/v1/rentals')
        .set(auth)
        .set('Idempotency-Key', randomUUID())
        .send({ offerId: offer.id });
      assert.equal(rent.status, 201, JSON.stringify(rent.body));
      const rentalId: string = rent.body.data.rentalId ?? rent.body.data.id;

      const [list] = await owner.send('/rentals');
      assert.match(list.text, new RegExp(`${rentalId}`));
      assert.match(list.text, /by trainer/);
      const [agents] = await owner.send('/agents');
      assert.match(agents.text, /trainer[\s\S]*1 active rental\b/);

      const confirm = sentMessages(await owner.pressButton(list, 'Terminate 1.'))[0];
      assert.match(confirm.text, /irreversible/);
      const calls = await owner.pressButton(confirm, 'Yes, terminate it');
      assert.match(edits(calls)[0], /Termination requested/);
      const [row] = await h.ctx.services.ds.query(
        'SELECT id, status, terminate_requested_at FROM deployments WHERE order_id = ?',
        [rentalId],
      );
      assert.equal(row.status, 'TERMINATING');
      assert.notEqual(row.terminate_requested_at, null);
      assert.match(callbackAnswers(await owner.pressButton(list, 'Terminate 1.'))[0], /already TERMINATING/);

      // Someone else's forged buttons for this deployment are refused.
      const stranger = h.owner(telegramId());
      const [msg] = await stranger.send('/help');
      for (const data of [`tm:${row.id}`, `tmy:${row.id}`]) {
        assert.match(callbackAnswers(await stranger.press(msg, data))[0], /not on your account/);
      }
    });
  });

  describe('/agents', () => {
    it('lists keys with limits, spend and active rentals; Revoke (confirmed) makes the key a 401', async () => {
      const owner = h.owner(telegramId());
      const res = await exchange(setupCodeIn(await owner.say('/newagent 5 50 1 builder')));
      const token: string = res.body.data.token;
      const keep = await exchange(setupCodeIn(await owner.say('/newagent 6 60 2 4h idle 90')));
      assert.equal(keep.status, 200);
      assert.equal(keep.body.data.key.maxRentalSeconds, 4 * 3600);
      assert.equal(keep.body.data.key.idleTerminateMinutes, 90);
      assert.equal(keep.body.data.key.name, 'telegram agent', 'a length is not taken for a name');

      const [list] = await owner.send('/agents');
      assert.match(list.text, /Agent keys/);
      assert.match(list.text, /builder/);
      assert.match(list.text, /\$5\.00 per rental, \$50\.00 total, 1 at a time/);
      assert.match(list.text, /spent \$0\.00 \(\$50\.00 left\), 0 active rentals/);
      assert.match(
        list.text,
        /\$6\.00 per rental, \$60\.00 total, 2 at a time, rentals up to 4 hours, stops after 1 h 30 min idle\n/,
      );
      assert.match(
        list.text,
        /\$5\.00 per rental, \$50\.00 total, 1 at a time\n/,
        'a key without a longest rental or idle time says nothing of them',
      );
      const key = await h.ctx.services.ds.getRepository(ApiKey).findOneByOrFail({ prefix: token.slice(4, 12) });

      let calls = await owner.press(list, `rv:${key.id}`);
      const [confirm] = sentMessages(calls);
      assert.match(confirm.text, /Revoke builder/);
      const ok = await h.ctx.api.get('/api/v1/me').set('Authorization', `Bearer ${token}`);
      assert.equal(ok.status, 200, 'nothing happens before the confirmation');

      calls = await owner.pressButton(confirm, 'Yes, revoke it');
      assert.match(edits(calls)[0], /^Revoked\./);
      const refused = await h.ctx.api.get('/api/v1/me').set('Authorization', `Bearer ${token}`);
      assert.equal(refused.status, 401);
      assert.equal(refused.body.error.code, 'UNAUTHENTICATED');
      const other = await h.ctx.api.get('/api/v1/me').set('Authorization', `Bearer ${keep.body.data.token}`);
      assert.equal(other.status, 200, 'the other key is untouched');

      const [after] = await owner.send('/agents');
      assert.doesNotMatch(after.text, /builder/);
    });

    it("refuses a forged Revoke for another owner's key, which keeps working", async () => {
      const victim = h.owner(telegramId());
      const res = await exchange(setupCodeIn(await victim.say('/newagent 5 50 1')));
      const key = await h.ctx.services.ds
        .getRepository(ApiKey)
        .findOneByOrFail({ prefix: res.body.data.token.slice(4, 12) });
      const attacker = h.owner(telegramId());
      const [msg] = await attacker.send('/help');
      for (const data of [`rv:${key.id}`, `rvy:${key.id}`]) {
        const calls = await attacker.press(msg, data);
        assert.match(callbackAnswers(calls)[0], /not on your account/);
      }
      const still = await h.ctx.api.get('/api/v1/me').set('Authorization', `Bearer ${res.body.data.token}`);
      assert.equal(still.status, 200);
    });

    it('says so when there are no agent keys', async () => {
      assert.match(await h.owner(telegramId()).say('/agents'), /no active agent keys/);
    });
  });

  describe('/balance and /topup', () => {
    it('gives a hosted top-up link for the owner account; paying it shows in /balance', async () => {
      const owner = h.owner(telegramId());
      assert.match(await owner.say('/balance'), /Compute credits: \$0\.00[\s\S]*No movements yet/);
      const [link] = await owner.send('/topup 20');
      assert.match(link.text, /Payment link for \$20\.00 of compute credits/);
      const url = /http:\/\/gpu\.test\/pay\/[0-9a-f-]{36}/.exec(link.text)?.[0];
      assert.ok(url, link.text);
      assert.deepEqual(
        buttonsOf(link).map((b) => b.url),
        [url],
      );
      assert.equal((await h.ctx.api.post(new URL(url).pathname)).status, 303);
      const balance = await owner.say('/balance');
      assert.match(balance, /Compute credits: \$20\.00/);
      assert.match(balance, /\+\$20\.00/);
    });

    it('refuses amounts outside $5-$500 and non-amounts; offers presets without an amount', async () => {
      const owner = h.owner(telegramId());
      assert.match(await owner.say('/topup 4'), /between \$5\.00 and \$500\.00; you asked for \$4\.00/);
      assert.match(await owner.say('/topup 501'), /between \$5\.00 and \$500\.00/);
      assert.match(await owner.say('/topup ten'), /"ten" is not an amount in US dollars: write dollars like 12\.50/);
      const [menu] = await owner.send('/topup');
      assert.deepEqual(
        buttonsOf(menu).map((b) => b.text),
        ['$10', '$25', '$50', '$100'],
      );
      const calls = await owner.pressButton(menu, '$25');
      assert.match(sentMessages(calls)[0].text, /Payment link for \$25\.00/);
      const forged = await owner.press(menu, 'tu:1');
      assert.match(callbackAnswers(forged)[0], /not valid/);
    });
  });

  describe('/ownerkey', () => {
    it('issues an OWNER key shown once with a warning; the token works', async () => {
      const owner = h.owner(telegramId());
      const text = await owner.say('/ownerkey');
      assert.match(text, /shown only this once/);
      assert.match(text, /Never give it to an agent/);
      const token = /gpr_[A-Za-z0-9]{8}\.[A-Za-z0-9_-]{43}/.exec(text)?.[0];
      assert.ok(token, text);
      const me = await h.ctx.api.get('/api/v1/me').set('Authorization', `Bearer ${token}`);
      assert.equal(me.status, 200);
      assert.equal(me.body.data.key.kind, 'OWNER');
      const account = await h.ctx.services.ds.getRepository(Account).findOneByOrFail({ telegramUserId: owner.id });
      assert.equal(me.body.data.user.id, account.id);
    });
  });

  describe('bad input', () => {
    it('answers unknown commands, stray text and non-text messages, and ignores edits', async () => {
      const owner = h.owner(telegramId());
      assert.match(await owner.say('/frobnicate now'), /I don't know the command \/frobnicate/);
      assert.match(await owner.say('hello there'), /didn't understand/);
      const sticker = await owner.deliver({
        message: {
          message_id: 1,
          date: 0,
          chat: owner.user.chat,
          from: owner.user.from,
          sticker: {
            file_id: 'x',
            file_unique_id: 'y',
            type: 'regular',
            width: 512,
            height: 512,
            is_animated: false,
            is_video: false,
          },
        },
      } as never);
      assert.match(sentMessages(sticker)[0].text, /only understand text commands/);
      const edited = await owner.deliver({
        edited_message: {
          message_id: 1,
          date: 0,
          edit_date: 1,
          chat: owner.user.chat,
          from: owner.user.from,
          text: '/start',
        },
      } as never);
      assert.deepEqual(edited, []);
    });

    it('answers forged or stale button data without acting', async () => {
      const owner = h.owner(telegramId());
      const [msg] = await owner.send('/help');
      for (const data of [
        '',
        'lim:zzz:perRental:500',
        'lim:../../x',
        'rvy:not-a-uuid',
        'apr:nonce',
        `rvy:${randomUUID()}`,
        'x'.repeat(64),
      ]) {
        const calls = await owner.press(msg, data);
        assert.equal(sentMessages(calls).length, 0, `no message for ${data}`);
        assert.ok(callbackAnswers(calls)[0].length > 0, `an explanation for ${JSON.stringify(data)}`);
      }
    });

    it('refuses group chats politely and leaves when added', async () => {
      const owner = h.owner(telegramId());
      const group = { id: -100123, type: 'group', title: 'Team' };
      const cmd = await owner.deliver(owner.user.message('/newagent 5 50 1', group));
      assert.equal(cmd.length, 1);
      assert.match(cmd[0].params.text, /only work in private chats/);
      assert.equal(cmd[0].params.chat_id, group.id);
      assert.deepEqual(await owner.deliver(owner.user.message('just chatting', group)), []);
      const added = await owner.deliver({
        my_chat_member: {
          chat: group,
          from: owner.user.from,
          date: 0,
          old_chat_member: { status: 'left', user: h.fake.bot },
          new_chat_member: { status: 'member', user: h.fake.bot },
        },
      } as never);
      assert.deepEqual(
        added.map((c) => c.method),
        ['sendMessage', 'leaveChat'],
      );
      const groupAccounts = await h.ctx.services.ds.getRepository(Account).countBy({ telegramChatId: group.id });
      assert.equal(groupAccounts, 0);
    });
  });
});
