import { recountKeySlots } from '../helpers/ledger.js';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { inTransaction } from '../../src/db/transaction.js';
import type { Account } from '../../src/modules/accounts/account.entity.js';
import { Deployment } from '../../src/modules/rentals/deployment.entity.js';
import { Order } from '../../src/modules/rentals/order.entity.js';
import type { RentalStatus } from '../../src/modules/rentals/rental-state.js';
import { ApiKey } from '../../src/modules/keys/api-key.entity.js';
import { NotificationsService } from '../../src/modules/notifications/notifications.service.js';
import { telegramSender } from '../../bot/notifier.js';
import { createBotHarness, telegramId, type BotHarness } from './harness.js';

describe(NotificationsService.name, () => {
  let h: BotHarness;
  before(async () => {
    h = await createBotHarness();
  });
  after(() => h.close());

  /** An owner account bound to a Telegram chat, as /start leaves it. */
  async function telegramAccount(): Promise<Account> {
    const id = telegramId();
    return inTransaction(h.ctx.services.ds, (m) => h.ctx.services.accounts.createAccount(m, { telegramUserId: id, telegramChatId: id }));
  }

  async function agentKey(accountId: string, name = 'research-bot'): Promise<ApiKey> {
    return inTransaction(h.ctx.services.ds, async (m) => {
      const { key } = await h.ctx.services.keys.create(m, {
        accountId,
        kind: 'AGENT',
        name,
        scopes: ['read', 'rent', 'manage'],
        origin: 'setup_code',
        maxPerRentalMinor: 1000,
        budgetLimitMinor: 5000,
        maxConcurrentDeployments: 1,
      });
      return key;
    });
  }

  /** A rental row pair as admission writes it, so the dispatcher has state changes to see. */
  async function rental(account: Account, key: ApiKey): Promise<Deployment> {
    const now = h.ctx.clock.now();
    const offer = (await h.ctx.services.ds.query('SELECT id, name, price_per_hour_minor FROM offers WHERE available = 1 LIMIT 1'))[0];
    const orderId = randomUUID();
    await h.ctx.services.ds.getRepository(Order).insert({
      id: orderId, accountId: account.id, keyId: key.id, funding: 'CREDITS', billingModel: 'ACCOUNT_BALANCE', status: 'PENDING',
      requestKind: 'OFFER', offerId: offer.id, gpuModel: null, gpuSlug: null, gpuCount: null, maxHourlyPriceMinor: null, budgetMinor: null,
      hourlyPriceMinor: Number(offer.price_per_hour_minor), durationSeconds: null, totalMinor: 0, currency: 'USD',
      failureCode: null, failureReason: null, reversalStatus: null, createdAt: now, updatedAt: now,
    });
    const d = h.ctx.services.ds.getRepository(Deployment).create({
      id: randomUUID(), orderId, accountId: account.id, keyId: key.id, status: 'PENDING', billingModel: 'ACCOUNT_BALANCE',
      hoursPurchased: null, durationSeconds: null, startedAt: null, endsAt: null, endedAt: null, providerId: 'local', offerId: offer.id,
      hourlyPriceMinor: Number(offer.price_per_hour_minor), spendCapMinor: null, attempt: 0, label: null, instanceId: null,
      sshHost: null, sshPort: null, sshUser: null, sshPublicKey: null, sshPrivateKeyEnc: null, sshKeyKid: null, meteredUntil: null,
      usageMinor: 0, terminateRequestedAt: null, terminationReason: null, verifyAttempts: 0, lastCheckDetail: null,
      statusChangedAt: now, createdAt: now, updatedAt: now,
    });
    await h.ctx.services.ds.getRepository(Deployment).insert(d);
    await recountKeySlots(h.ctx.services.ds, key.id);
    return d;
  }

  async function moveTo(d: Deployment, status: RentalStatus, failureReason?: string): Promise<void> {
    const now = h.ctx.clock.now();
    await h.ctx.services.ds.getRepository(Deployment).update({ id: d.id }, { status, statusChangedAt: now, updatedAt: now });
    await h.ctx.services.ds.getRepository(Order).update({ id: d.orderId }, {
      status, updatedAt: now, ...(failureReason ? { failureReason, failureCode: 'PROVISIONING_FAILED', reversalStatus: 'SUCCEEDED' as const } : {}),
    });
    await recountKeySlots(h.ctx.services.ds, d.keyId);
  }

  async function debit(accountId: string, amountMinor: number): Promise<void> {
    await inTransaction(h.ctx.services.ds, (m) =>
      h.ctx.services.ledger.post(m, { accountId, kind: 'USAGE', amountMinor: -amountMinor, externalRef: `test-usage:${randomUUID()}`, description: 'GPU usage' }),
    );
  }

  function messagesTo(chatId: number): string[] {
    return h.fake.calls.filter((c) => c.method === 'sendMessage' && Number(c.params.chat_id) === chatId).map((c) => c.params.text as string);
  }

  it('tells the owner once when a top-up is credited', async () => {
    const account = await telegramAccount();
    const { topup } = await h.ctx.services.payments.topups.create({ accountId: account.id, keyId: null }, randomUUID(), { amountMinor: 2000 });
    assert.equal((await h.ctx.api.post(new URL(topup.paymentUrl!).pathname)).status, 303);

    await h.runNotifications();
    await h.runNotifications();
    const sent = messagesTo(account.telegramChatId!);
    assert.equal(sent.length, 1, JSON.stringify(sent));
    assert.match(sent[0], /Top-up credited: \+\$20\.00\. Your credits are now \$20\.00\./);
  });

  it('reports an agent rental becoming ACTIVE, then TERMINATED, each once, naming the agent', async () => {
    const account = await telegramAccount();
    const key = await agentKey(account.id, 'trainer');
    const d = await rental(account, key);
    await h.runNotifications();
    assert.deepEqual(messagesTo(account.telegramChatId!), [], 'nothing to say while it is pending');

    h.ctx.clock.advance(1000);
    await moveTo(d, 'ACTIVE');
    await h.runNotifications();
    h.ctx.clock.advance(1000);
    await h.runNotifications();
    let sent = messagesTo(account.telegramChatId!);
    assert.equal(sent.length, 1, JSON.stringify(sent));
    assert.match(sent[0], new RegExp(`Rental is ACTIVE: .* started by agent "trainer" \\(${key.prefix}\\).*Rental ${d.orderId}\\.`));

    h.ctx.clock.advance(60_000);
    await moveTo(d, 'TERMINATED');
    await h.runNotifications();
    await h.runNotifications();
    sent = messagesTo(account.telegramChatId!);
    assert.equal(sent.length, 2, JSON.stringify(sent));
    assert.match(sent[1], /Rental TERMINATED: .*billing has stopped/);
  });

  it('reports a failed rental with its reason and reversal', async () => {
    const account = await telegramAccount();
    const d = await rental(account, await agentKey(account.id));
    h.ctx.clock.advance(1000);
    await moveTo(d, 'FAILED', 'The provider could not start the machine.');
    await h.runNotifications();
    const sent = messagesTo(account.telegramChatId!);
    assert.equal(sent.length, 1);
    assert.match(sent[0], /Rental FAILED: .*Reason: The provider could not start the machine\. Its charge was reversed\./);
  });

  it('warns once when a debit takes credits below the threshold, not on every debit below it', async () => {
    const account = await telegramAccount();
    const { topup } = await h.ctx.services.payments.topups.create({ accountId: account.id, keyId: null }, randomUUID(), { amountMinor: 1000 });
    await h.ctx.api.post(new URL(topup.paymentUrl!).pathname);
    await debit(account.id, 300); // $7.00 left: above $5
    await h.runNotifications();
    assert.equal(messagesTo(account.telegramChatId!).filter((t) => /running low/.test(t)).length, 0);
    await debit(account.id, 300); // $4.00: crosses
    await debit(account.id, 100); // $3.00: still below, no second warning
    await h.runNotifications();
    const low = messagesTo(account.telegramChatId!).filter((t) => /running low/.test(t));
    assert.deepEqual(low.length, 1, JSON.stringify(low));
    assert.match(low[0], /Credits running low: \$4\.00 left \(under \$5\.00\)/);
  });

  it('does not message accounts without a Telegram chat', async () => {
    const plain = await inTransaction(h.ctx.services.ds, (m) => h.ctx.services.accounts.createAccount(m));
    const mark = h.fake.mark();
    const { topup } = await h.ctx.services.payments.topups.create({ accountId: plain.id, keyId: null }, randomUUID(), { amountMinor: 600 });
    await h.ctx.api.post(new URL(topup.paymentUrl!).pathname);
    await h.runNotifications();
    assert.deepEqual(h.fake.callsSince(mark, 'sendMessage'), []);
    const [row] = await h.ctx.services.ds.query('SELECT COUNT(*) AS n FROM telegram_notifications WHERE account_id = ?', [plain.id]);
    assert.equal(Number(row.n), 0);
  });

  it('gives up on a chat that blocked the bot, and retries a transient failure later', async () => {
    const blocked = await telegramAccount();
    h.fake.blockedChats.add(blocked.telegramChatId!);
    const { topup } = await h.ctx.services.payments.topups.create({ accountId: blocked.id, keyId: null }, randomUUID(), { amountMinor: 700 });
    await h.ctx.api.post(new URL(topup.paymentUrl!).pathname);
    const r1 = await h.runNotifications();
    assert.ok(r1.failed >= 1);
    const [row] = await h.ctx.services.ds.query('SELECT sent_at, failed_at, attempts FROM telegram_notifications WHERE account_id = ?', [blocked.id]);
    assert.equal(row.sent_at, null);
    assert.notEqual(row.failed_at, null);
    assert.equal(Number(row.attempts), 1);

    // A sender that fails once (Telegram unreachable) gets the message out on a later round.
    const flaky = await telegramAccount();
    const { topup: t2 } = await h.ctx.services.payments.topups.create({ accountId: flaky.id, keyId: null }, randomUUID(), { amountMinor: 800 });
    await h.ctx.api.post(new URL(t2.paymentUrl!).pathname);
    const real = telegramSender(h.bot.api);
    let failures = 1;
    const sender = {
      send: async (chatId: number, text: string) => {
        if (chatId === flaky.telegramChatId && failures-- > 0) throw new Error('ECONNRESET');
        return real.send(chatId, text);
      },
    };
    const first = await h.notifications.runOnce(sender);
    assert.equal(first.retrying, 1);
    assert.equal(messagesTo(flaky.telegramChatId!).length, 0);
    await h.notifications.runOnce(sender);
    assert.equal(messagesTo(flaky.telegramChatId!).length, 0, 'not retried before the retry delay');
    h.ctx.clock.advance(61_000);
    await h.notifications.runOnce(sender);
    assert.equal(messagesTo(flaky.telegramChatId!).length, 1);
  });
});
