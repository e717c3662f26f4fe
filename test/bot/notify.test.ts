import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { accountOfTelegramUser } from '../../src/modules/accounts/accounts.repository.js';
import { callbackAnswers, createBotHarness, telegramId, type BotHarness } from './harness.js';

/** /notify: the owner chooses which events the bot tells them of; the notifications follow the choice. */
describe('bot /notify', function () {
  this.timeout(60_000);
  let h: BotHarness;
  before(async () => {
    h = await createBotHarness();
  });
  after(() => h.close());

  const messagesTo = (chatId: number) =>
    h.fake.calls
      .filter((c) => c.method === 'sendMessage' && Number(c.params.chat_id) === chatId)
      .map((c) => c.params.text as string);
  const buttonsOf = (markup: unknown) =>
    ((markup as { inline_keyboard: { text: string }[][] }).inline_keyboard ?? []).flat().map((b) => b.text);

  async function payTopup(accountId: string, amountMinor: number): Promise<void> {
    const { topup } = await h.ctx.services.payments.topups.create({ accountId, keyId: null }, randomUUID(), {
      amountMinor,
    });
    assert.equal((await h.ctx.api.post(new URL(topup.paymentUrl!).pathname)).status, 303);
  }

  it('lists every event type on by default, and a toggled one stops (and restarts) its notifications', async () => {
    const owner = h.owner(telegramId());
    await owner.send('/start');
    const account = (await accountOfTelegramUser(h.ctx.services.ds, owner.id))!;
    const [menu] = await owner.send('/notify');
    assert.deepEqual(buttonsOf(menu.reply_markup), [
      '✅ Rental active',
      '✅ Rental failed',
      '✅ Rental terminated',
      '✅ Top-up credited',
      '✅ Credits running low',
      '✅ Rental ending soon',
      '✅ Rental idle, about to stop',
    ]);

    let calls = await owner.pressButton(menu, /Top-up credited/);
    assert.deepEqual(callbackAnswers(calls), ['Top-up credited: off']);
    const edited = calls.find((c) => c.method === 'editMessageReplyMarkup');
    assert.ok(edited, 'the buttons show the new choice');
    assert.ok(buttonsOf(edited.params.reply_markup).includes('▫️ Top-up credited'));
    const [again] = await owner.send('/notify');
    assert.ok(buttonsOf(again.reply_markup).includes('▫️ Top-up credited'), 'the choice is stored');

    await payTopup(account.id, 1500);
    await h.runNotifications();
    assert.deepEqual(
      messagesTo(owner.id).filter((t) => /Top-up credited/.test(t)),
      [],
      'not told while off',
    );

    calls = await owner.pressButton(again, /Top-up credited/);
    assert.deepEqual(callbackAnswers(calls), ['Top-up credited: on']);
    h.ctx.clock.advance(1000);
    await payTopup(account.id, 2000);
    await h.runNotifications();
    const told = messagesTo(owner.id).filter((t) => /Top-up credited/.test(t));
    assert.equal(told.length, 1, JSON.stringify(told));
    assert.match(told[0], /\+\$20\.00\. Your credits are now \$35\.00\./);
  });

  it('keeps a choice stored before a type was offered, and turns that type on for it', async () => {
    const chatId = telegramId();
    // As /notify stored a choice when it listed only the types turned on: credits.low was turned off.
    await h.ctx.services.ds.query(
      'INSERT INTO telegram_notify_prefs (chat_id, event_types, updated_at) VALUES (?, ?, ?)',
      [chatId, 'rental.active,rental.failed,rental.terminated,topup.paid', new Date()],
    );
    const prefs = h.notifications.preferences;
    const on = [
      'rental.active',
      'rental.failed',
      'rental.terminated',
      'topup.paid',
      'rental.expiring',
      'rental.idle_warning',
    ];
    assert.deepEqual(await prefs.of(chatId), on);
    assert.deepEqual(
      await prefs.toggle(chatId, 'rental.expiring'),
      on.filter((t) => t !== 'rental.expiring'),
    );
    assert.deepEqual(
      await prefs.of(chatId),
      on.filter((t) => t !== 'rental.expiring'),
      'a new type turned off stays off',
    );
  });
});
