import { recountKeySlots } from '../helpers/ledger.js';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { NotificationDeliverJobs1763800011400 } from '../../migrations/1763800011400-NotificationDeliverJobs.js';
import { MysqlJobRepository } from '../../src/jobs/mysql-jobs.repository.js';
import { databaseBefore } from '../helpers/migrated-before.js';
import type { Account } from '../../src/modules/accounts/account.entity.js';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import { Order } from '../../src/modules/rentals/store/order.entity.js';
import type { RentalStatus } from '../../src/modules/rentals/state/rental-status.js';
import { ApiKey } from '../../src/modules/keys/api-key.entity.js';
import { NotificationsService } from '../../src/modules/notifications/notifications.service.js';
import { recordRentalEvent } from '../../src/modules/rentals/state/rental-events.js';
import { transition } from '../../src/modules/rentals/state/rental-state.js';
import type { EventType } from '../../src/modules/events/event-types.js';
import { createBot } from '../../bot/bot.js';
import { startBotRole } from '../../bot/runtime.js';
import { waitFor } from '../helpers/wait.js';
import { BOT_TOKEN, createBotHarness, telegramId, type BotHarness } from './harness.js';

describe(NotificationsService.name, () => {
  let h: BotHarness;
  before(async () => {
    h = await createBotHarness();
  });
  after(() => h.close());

  /** An owner account bound to a Telegram chat, as /start leaves it. */
  async function telegramAccount(): Promise<Account> {
    const id = telegramId();
    return h.ctx.services.store.transaction((r) =>
      h.ctx.services.accounts.createAccount(r.accounts, { telegramUserId: id, telegramChatId: id }),
    );
  }

  async function agentKey(accountId: string, name = 'research-bot'): Promise<ApiKey> {
    return h.ctx.services.store.transaction(async (r) => {
      const { key } = await h.ctx.services.keys.create(r.accounts, {
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
    const offer = (
      await h.ctx.services.ds.query('SELECT id, name, price_per_hour_minor FROM offers WHERE available = 1 LIMIT 1')
    )[0];
    const orderId = randomUUID();
    await h.ctx.services.ds.getRepository(Order).insert({
      id: orderId,
      accountId: account.id,
      keyId: key.id,
      funding: 'CREDITS',
      billingModel: 'ACCOUNT_BALANCE',
      status: 'PENDING',
      requestKind: 'OFFER',
      offerId: offer.id,
      gpuModel: null,
      gpuSlug: null,
      gpuCount: null,
      maxHourlyPriceMinor: null,
      budgetMinor: null,
      hourlyPriceMinor: Number(offer.price_per_hour_minor),
      durationSeconds: null,
      totalMinor: 0,
      currency: 'USD',
      failureCode: null,
      failureReason: null,
      reversalStatus: null,
      createdAt: now,
      updatedAt: now,
    });
    const d = h.ctx.services.ds.getRepository(Deployment).create({
      id: randomUUID(),
      orderId,
      accountId: account.id,
      keyId: key.id,
      status: 'PENDING',
      billingModel: 'ACCOUNT_BALANCE',
      hoursPurchased: null,
      durationSeconds: null,
      startedAt: null,
      endsAt: null,
      endedAt: null,
      providerId: 'local',
      offerId: offer.id,
      hourlyPriceMinor: Number(offer.price_per_hour_minor),
      spendCapMinor: null,
      attempt: 0,
      label: null,
      instanceId: null,
      sshHost: null,
      sshPort: null,
      sshUser: null,
      sshPublicKey: null,
      sshPrivateKeyEnc: null,
      sshKeyKid: null,
      meteredUntil: null,
      usageMinor: 0,
      terminateRequestedAt: null,
      terminationReason: null,
      verifyAttempts: 0,
      lastCheckDetail: null,
      statusChangedAt: now,
      createdAt: now,
      updatedAt: now,
    });
    await h.ctx.services.ds.getRepository(Deployment).insert(d);
    await recountKeySlots(h.ctx.services.ds, key.id);
    return d;
  }

  /** Moves the rental as the lifecycle does, through the state machine, which writes the event owners are told of. */
  async function moveTo(d: Deployment, status: RentalStatus, failureReason?: string): Promise<void> {
    const at = h.ctx.clock.now();
    const order = failureReason
      ? { failureReason, failureCode: 'PROVISIONING_FAILED' as const, reversalStatus: 'SUCCEEDED' as const }
      : {};
    const moved = await h.ctx.services.store.transaction((r) => transition(r, d.id, [d.status], status, { at, order }));
    assert.ok(moved, `${d.status} -> ${status}`);
    d.status = status;
    await recountKeySlots(h.ctx.services.ds, d.keyId);
  }

  async function debit(accountId: string, amountMinor: number): Promise<void> {
    await h.ctx.services.store.transaction((r) =>
      h.ctx.services.ledger.post(r, {
        accountId,
        kind: 'USAGE',
        amountMinor: -amountMinor,
        externalRef: `test-usage:${randomUUID()}`,
        description: 'GPU usage',
      }),
    );
  }

  function messagesTo(chatId: number): string[] {
    return h.fake.calls
      .filter((c) => c.method === 'sendMessage' && Number(c.params.chat_id) === chatId)
      .map((c) => c.params.text as string);
  }

  it('tells the owner once when a top-up is credited', async () => {
    const account = await telegramAccount();
    const { topup } = await h.ctx.services.payments.topups.create(
      { accountId: account.id, keyId: null },
      randomUUID(),
      { amountMinor: 2000 },
    );
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
    assert.match(
      sent[0],
      new RegExp(`Rental is ACTIVE: .* started by agent "trainer" \\(${key.prefix}\\).*Rental ${d.orderId}\\.`),
    );

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
    assert.match(
      sent[0],
      /Rental FAILED: .*Reason: The provider could not start the machine\. Its charge was reversed\./,
    );
  });

  /** A rental ACTIVE for 50 minutes under a one-hour lease, that its lifecycle has just written `type` for. */
  async function activeRentalWith(type: EventType): Promise<{ account: Account; d: Deployment; endsAt: Date }> {
    const account = await telegramAccount();
    const d = await rental(account, await agentKey(account.id));
    const now = h.ctx.clock.now();
    const endsAt = new Date(now.getTime() + 10 * 60_000);
    await moveTo(d, 'ACTIVE');
    await h.ctx.services.ds
      .getRepository(Deployment)
      .update({ id: d.id }, { startedAt: new Date(now.getTime() - 50 * 60_000), endsAt, leaseSeconds: 3600 });
    await h.ctx.services.store.transaction((r) => recordRentalEvent(r, d.id, type, now));
    return { account, d, endsAt };
  }

  it('tells the owner once that a rental is about to reach its end, naming its GPU, id and end', async () => {
    const { account, d, endsAt } = await activeRentalWith('rental.expiring');
    await h.runNotifications();
    await h.runNotifications();
    const told = messagesTo(account.telegramChatId!).filter((t) => /ending soon/.test(t));
    assert.equal(told.length, 1, JSON.stringify(told));
    const [gpuName] = (await h.ctx.services.ds.query('SELECT name FROM offers WHERE id = ?', [d.offerId])).map(
      (r: { name: string }) => r.name,
    );
    const hhmm = endsAt.toISOString().slice(11, 16);
    assert.ok(told[0].includes(`${gpuName} (rental ${d.orderId}) ends at ${hhmm} UTC (lease end)`), told[0]);
  });

  it('tells the owner once that an idle rental will be stopped, and in how many minutes', async () => {
    const { account, d } = await activeRentalWith('rental.idle_warning');
    await h.runNotifications();
    await h.runNotifications();
    const told = messagesTo(account.telegramChatId!).filter((t) => /idle/.test(t));
    assert.equal(told.length, 1, JSON.stringify(told));
    assert.match(
      told[0],
      new RegExp(
        `\\(rental ${d.orderId}\\): its GPUs have been idle; it will be stopped in 10 minutes unless they get busy\\.`,
      ),
    );
  });

  it('says nothing of a rental ending or idle when the owner turned that off with /notify, and records it as not to send', async () => {
    for (const type of ['rental.expiring', 'rental.idle_warning'] as const) {
      const account = await telegramAccount();
      const on = await h.notifications.preferences.toggle(account.telegramChatId!, type);
      assert.ok(!on.includes(type));
      const d = await rental(account, await agentKey(account.id));
      await moveTo(d, 'ACTIVE');
      await h.ctx.services.ds
        .getRepository(Deployment)
        .update({ id: d.id }, { startedAt: h.ctx.clock.now(), endsAt: new Date(h.ctx.clock.now().getTime() + 60_000) });
      await h.ctx.services.store.transaction((r) => recordRentalEvent(r, d.id, type, h.ctx.clock.now()));
      await h.runNotifications();
      const sent = messagesTo(account.telegramChatId!);
      assert.deepEqual(
        sent.filter((t) => /ending soon|idle/.test(t)),
        [],
        `${type}: ${JSON.stringify(sent)}`,
      );
      assert.equal(sent.filter((t) => /ACTIVE/.test(t)).length, 1, 'the types still on are told');
      const [row] = await h.ctx.services.ds.query(
        "SELECT sent_at, last_error FROM telegram_notifications WHERE account_id = ? AND kind IN ('RENTAL_EXPIRING', 'RENTAL_IDLE_WARNING')",
        [account.id],
      );
      assert.equal(row.sent_at, null);
      assert.equal(row.last_error, 'turned off with /notify');
    }
  });

  it('warns once when a debit takes credits below the threshold, not on every debit below it', async () => {
    const account = await telegramAccount();
    const { topup } = await h.ctx.services.payments.topups.create(
      { accountId: account.id, keyId: null },
      randomUUID(),
      { amountMinor: 1000 },
    );
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
    const plain = await h.ctx.services.store.transaction((r) => h.ctx.services.accounts.createAccount(r.accounts));
    const mark = h.fake.mark();
    const { topup } = await h.ctx.services.payments.topups.create({ accountId: plain.id, keyId: null }, randomUUID(), {
      amountMinor: 600,
    });
    await h.ctx.api.post(new URL(topup.paymentUrl!).pathname);
    await h.runNotifications();
    assert.deepEqual(h.fake.callsSince(mark, 'sendMessage'), []);
    const [row] = await h.ctx.services.ds.query(
      'SELECT COUNT(*) AS n FROM telegram_notifications WHERE account_id = ?',
      [plain.id],
    );
    assert.equal(Number(row.n), 0);
  });

  /** The notification row of the only notification to `accountId`. */
  async function notificationOf(accountId: string): Promise<{
    id: string;
    sent_at: Date | null;
    failed_at: Date | null;
    attempts: number;
    last_error: string | null;
  }> {
    const rows = await h.ctx.services.ds.query(
      'SELECT id, sent_at, failed_at, attempts, last_error FROM telegram_notifications WHERE account_id = ?',
      [accountId],
    );
    assert.equal(rows.length, 1, JSON.stringify(rows));
    return { ...rows[0], id: String(rows[0].id), attempts: Number(rows[0].attempts) };
  }

  /** The deliver jobs of one notification, as Agenda keeps them. */
  async function deliverJobs(notificationId: string): Promise<
    {
      data: { notificationId: string };
      next_run_at: Date | null;
      failed_at: Date | null;
      fail_count: number | null;
      last_finished_at: Date | null;
    }[]
  > {
    const rows = await h.ctx.services.ds.query(
      `SELECT CAST(data AS CHAR) AS data, next_run_at, failed_at, fail_count, last_finished_at FROM agenda_jobs
        WHERE name = 'notifications.deliver' AND unique_key = ?`,
      [notificationId],
    );
    return rows.map((r: { data: string }) => ({ ...r, data: JSON.parse(r.data) }));
  }

  async function creditedTopup(accountId: string, amountMinor: number): Promise<void> {
    const { topup } = await h.ctx.services.payments.topups.create({ accountId, keyId: null }, randomUUID(), {
      amountMinor,
    });
    assert.equal((await h.ctx.api.post(new URL(topup.paymentUrl!).pathname)).status, 303);
  }

  it('sends each notification through one Agenda job, notifications.deliver with its id, that a second run leaves alone', async () => {
    const account = await telegramAccount();
    await creditedTopup(account.id, 900);
    await h.runNotifications();
    await h.runNotifications();
    const n = await notificationOf(account.id);
    assert.notEqual(n.sent_at, null);
    const jobs = await deliverJobs(n.id);
    assert.equal(jobs.length, 1, 'one job per notification, however often its cause is scanned');
    assert.deepEqual(jobs[0].data, { notificationId: n.id });
    assert.notEqual(jobs[0].last_finished_at, null);

    // A run repeated after the message went out (its lock outlived, say) sends nothing again.
    const mark = h.fake.mark();
    assert.equal(await h.notifications.deliver(n.id, h.sender), 'done-before');
    assert.deepEqual(h.fake.callsSince(mark, 'sendMessage'), []);
    assert.equal(messagesTo(account.telegramChatId!).length, 1);
  });

  it('gives up at once on a chat that blocked the bot', async () => {
    const blocked = await telegramAccount();
    h.fake.blockedChats.add(blocked.telegramChatId!);
    await creditedTopup(blocked.id, 700);
    await h.runNotifications();
    const n = await notificationOf(blocked.id);
    assert.equal(n.sent_at, null);
    assert.notEqual(n.failed_at, null);
    assert.equal(n.attempts, 1);
    const [job] = await deliverJobs(n.id);
    assert.equal(job.next_run_at, null, 'no retry is scheduled');
    assert.equal(job.failed_at, null, 'giving up is the job succeeding');
  });

  it('retries a transient failure after the retry delay, and delivers it then', async () => {
    const flaky = await telegramAccount();
    await creditedTopup(flaky.id, 800);
    const real = h.sender;
    let failures = 1;
    h.sender = {
      send: async (chatId, text) => {
        if (chatId === flaky.telegramChatId && failures-- > 0) throw new Error('ECONNRESET');
        return real.send(chatId, text);
      },
    };
    try {
      await h.runNotifications();
      assert.equal(messagesTo(flaky.telegramChatId!).length, 0);
      const n = await notificationOf(flaky.id);
      assert.equal(n.attempts, 1);
      assert.equal(n.last_error, 'ECONNRESET');
      assert.equal(n.failed_at, null, 'not given up on');
      const [job] = await deliverJobs(n.id);
      assert.equal(job.fail_count, 1);
      assert.ok(job.next_run_at!.getTime() - job.failed_at!.getTime() >= 300, 'not retried before the retry delay');

      await waitFor(() => messagesTo(flaky.telegramChatId!).length === 1, {
        timeoutMs: 10_000,
        what: 'the retry to deliver',
      });
      await waitFor(async () => (await notificationOf(flaky.id)).sent_at !== null, {
        timeoutMs: 10_000,
        what: 'the row to be marked sent',
      });
      assert.equal((await notificationOf(flaky.id)).attempts, 2);
    } finally {
      h.sender = real;
    }
  });

  it('gives up after five tries of a failure that does not pass', async () => {
    const down = await telegramAccount();
    await creditedTopup(down.id, 600);
    const real = h.sender;
    h.sender = {
      send: async (chatId, text) => {
        if (chatId === down.telegramChatId) throw new Error('ETIMEDOUT');
        return real.send(chatId, text);
      },
    };
    try {
      await h.runNotifications();
      await waitFor(async () => (await notificationOf(down.id)).failed_at !== null, {
        timeoutMs: 10_000,
        what: 'the fifth try',
      });
      const n = await notificationOf(down.id);
      assert.equal(n.attempts, 5);
      assert.equal(n.sent_at, null);
      await waitFor(async () => (await deliverJobs(n.id))[0].next_run_at === null, {
        timeoutMs: 10_000,
        what: 'the job to finish',
      });
      assert.equal((await notificationOf(down.id)).attempts, 5, 'no sixth try');
    } finally {
      h.sender = real;
    }
  });

  it('the bot role collects on a repeating Agenda job, not a timer, and delivers what it finds', async () => {
    const account = await telegramAccount();
    await creditedTopup(account.id, 1100);
    const role = await startBotRole(
      h.ctx.services,
      createBot({ services: h.ctx.services, token: BOT_TOKEN, apiRoot: h.fake.url }),
      { notifyIntervalMs: 60_000 },
    );
    try {
      await waitFor(() => messagesTo(account.telegramChatId!).length === 1, {
        timeoutMs: 10_000,
        what: 'the top-up message',
      });
      const rows = await h.ctx.services.ds.query(
        "SELECT type, repeat_interval FROM agenda_jobs WHERE name = 'notifications.collect' AND type = 'single'",
      );
      assert.deepEqual(
        rows.map((r: { type: string; repeat_interval: string }) => ({ ...r })),
        [{ type: 'single', repeat_interval: '60000' }],
      );
    } finally {
      await role.stop();
    }
  });

  it('gives each notification the timer had left unsent its deliver job when migrated', async function () {
    this.timeout(60_000);
    // A database of its own, migrated up to just before notifications became jobs.
    const before = await databaseBefore(NotificationDeliverJobs1763800011400, 'notify');
    const q = before.runner;
    const ds = before.ds;
    try {
      const accountId = randomUUID();
      const now = new Date();
      await q.query(`INSERT INTO accounts (id, billing_model, created_at) VALUES (?, 'ACCOUNT_BALANCE', ?)`, [
        accountId,
        now,
      ]);
      const notification = async (key: string, sentAt: Date | null, failedAt: Date | null) => {
        const res = await q.query(
          `INSERT INTO telegram_notifications (notify_key, account_id, chat_id, kind, text, created_at, sent_at, failed_at, attempts)
           VALUES (?, ?, 42, 'TOPUP_CREDITED', 'hello', ?, ?, ?, 1)`,
          [key, accountId, now, sentAt, failedAt],
        );
        return String(res.insertId);
      };
      const waiting = await notification('topup:1', null, null);
      await notification('topup:2', now, null);
      await notification('topup:3', null, now);

      await new NotificationDeliverJobs1763800011400().up(q);

      const { jobs } = await new MysqlJobRepository(ds).queryJobs({ name: 'notifications.deliver' });
      assert.deepEqual(
        jobs.map((j) => j.data),
        [{ notificationId: waiting }],
        'only the unsent one, with the payload the job map declares',
      );
      assert.ok(
        Math.abs(jobs[0].nextRunAt!.getTime() - Date.now()) < 60_000,
        `due now: ${jobs[0].nextRunAt?.toISOString()}`,
      );
      assert.equal(jobs[0].state, 'queued');
    } finally {
      await before.close();
    }
  });
});
