import assert from 'node:assert/strict';
import type { Bot } from 'grammy';
import type { Message, Update } from 'grammy/types';
import { createBot } from '../../bot/bot.js';
import type { BotContext } from '../../bot/context.js';
import { telegramSender } from '../../bot/notifier.js';
import { createBotJobs, type BotJobs } from '../../src/container.js';
import { agendaOf, startJobWorker, type JobWorker } from '../../src/jobs/agenda.js';
import { AGENDA_JOBS_TABLE } from '../../src/jobs/mysql-jobs.repository.js';
import type {
  NotificationSender,
  NotificationsService,
} from '../../src/modules/notifications/notifications.service.js';
import { FakeTelegramServer, type RecordedCall, type SimulatedUser } from '../fakes/telegram-api.js';
import { createTestContext, type ContextOptions, type TestContext } from '../helpers/context.js';
import { waitFor } from '../helpers/wait.js';

export const BOT_TOKEN = '7000000001:AAFakeTokenForTheLocalTelegramServer_x';

export interface BotHarness {
  ctx: TestContext;
  fake: FakeTelegramServer;
  bot: Bot<BotContext>;
  notifications: NotificationsService;
  /** The bot role's notification jobs, as startBotRole builds them (a failed send is retried after 300 ms). */
  botJobs: BotJobs;
  /** What the deliver jobs send with: the bot's Bot API client unless a test swaps it. */
  sender: NotificationSender;
  /** A simulated owner in a private chat, talking to the bot through `bot.handleUpdate`. */
  owner(telegramId: number, name?: string): Owner;
  /** A new Bot instance on the same database and fake, as after a process restart. */
  restartBot(): Promise<void>;
  /**
   * One round of the bot role's notification jobs: a collect, then every deliver job it leaves
   * due, through a real Agenda processor (started at the first round). A retry waiting for its
   * delay is not waited for.
   */
  runNotifications(): Promise<void>;
  close(): Promise<void>;
}

let nextTelegramId = 910_000_000 + Math.floor(Math.random() * 1_000_000) * 10;

/** A fresh Telegram user id for this run (the database is shared by every test of a run). */
export function telegramId(): number {
  return nextTelegramId++;
}

/** The test context, a fake Telegram Bot API and the real bot pointed at it (apiRoot). */
export async function createBotHarness(opts: ContextOptions = {}): Promise<BotHarness> {
  const ctx = await createTestContext({ ...opts, env: { TELEGRAM_BOT_TOKEN: BOT_TOKEN, ...opts.env } });
  const fake = await FakeTelegramServer.start({ token: BOT_TOKEN });
  const make = async () => {
    const bot = createBot({ services: ctx.services, token: BOT_TOKEN, apiRoot: fake.url });
    await bot.init();
    return bot;
  };
  const botJobs = createBotJobs(
    ctx.services,
    { send: (chatId, text) => h.sender.send(chatId, text) },
    { retryAfterMs: 300 },
  );
  let processor: JobWorker | undefined;
  const h: BotHarness = {
    ctx,
    fake,
    bot: await make(),
    notifications: botJobs.notifications,
    botJobs,
    sender: { send: (chatId, text) => telegramSender(h.bot.api).send(chatId, text) },
    owner: (id, name) => new Owner(h, fake.user(id, name)),
    async restartBot() {
      h.bot = await make();
    },
    async runNotifications() {
      if (!processor) {
        // Polls find retries once their delay is over; the rest wake the processor at once.
        agendaOf(botJobs.jobs).processEvery(50);
        processor = await startJobWorker(botJobs, { scheduleRepeating: false });
      }
      await botJobs.jobs.now('notifications.collect', {});
      let left = 0;
      await waitFor(
        async () => {
          const [row] = await ctx.services.ds.query(
            `SELECT COUNT(*) AS n FROM ${AGENDA_JOBS_TABLE}
              WHERE name IN ('notifications.collect', 'notifications.deliver') AND type = 'normal' AND disabled = 0
                AND (locked_at IS NOT NULL OR next_run_at <= ?)`,
            [new Date()],
          );
          left = Number(row.n);
          return left === 0;
        },
        { timeoutMs: 10_000, intervalMs: 20, what: () => `notification jobs to settle (${left} due or running)` },
      );
    },
    async close() {
      await processor?.stop({ timeoutMs: 10_000 });
      await fake.close();
      await ctx.close();
    },
  };
  return h;
}

/** A Telegram user as a test drives them: send text, press buttons, read what the bot answered. */
export class Owner {
  constructor(
    private readonly h: BotHarness,
    readonly user: SimulatedUser,
  ) {}

  get id(): number {
    return this.user.from.id;
  }

  /** Delivers an update to the bot and returns the Bot API calls it made while handling it. */
  async deliver(partial: Omit<Update, 'update_id'>): Promise<RecordedCall[]> {
    const mark = this.h.fake.mark();
    await this.h.bot.handleUpdate(this.h.fake.makeUpdate(partial));
    return this.h.fake.callsSince(mark);
  }

  /** Sends text; returns the messages the bot sent in reply. */
  async send(text: string): Promise<Message.TextMessage[]> {
    return sentMessages(await this.deliver(this.user.message(text)));
  }

  /** Sends text and returns the one reply's text. */
  async say(text: string): Promise<string> {
    const replies = await this.send(text);
    assert.equal(
      replies.length,
      1,
      `expected one reply to ${JSON.stringify(text)}, got ${JSON.stringify(replies.map((r) => r.text))}`,
    );
    return replies[0].text;
  }

  /** Presses a button by callback data on one of the bot's messages; returns every call made. */
  async press(message: Message, data: string): Promise<RecordedCall[]> {
    const calls = await this.deliver(this.user.press(message, data));
    assert.ok(
      calls.some((c) => c.method === 'answerCallbackQuery'),
      `the bot must answer every button press; calls: ${JSON.stringify(calls.map((c) => c.method))}`,
    );
    return calls;
  }

  /** Presses the button whose text matches on `message`. */
  async pressButton(message: Message, text: RegExp | string): Promise<RecordedCall[]> {
    const rows: { text: string; callback_data?: string }[][] =
      (message as { reply_markup?: { inline_keyboard?: { text: string; callback_data?: string }[][] } }).reply_markup
        ?.inline_keyboard ?? [];
    const button = rows.flat().find((b) => (typeof text === 'string' ? b.text === text : text.test(b.text)));
    assert.ok(button?.callback_data, `no button ${text} on ${JSON.stringify(message.text)}: ${JSON.stringify(rows)}`);
    return this.press(message, button.callback_data);
  }
}

export function sentMessages(calls: RecordedCall[]): Message.TextMessage[] {
  return calls.filter((c) => c.method === 'sendMessage' && c.ok).map((c) => c.result as Message.TextMessage);
}

export function edits(calls: RecordedCall[]): string[] {
  return calls.filter((c) => c.method === 'editMessageText' && c.ok).map((c) => c.params.text as string);
}

export function callbackAnswers(calls: RecordedCall[]): string[] {
  return calls
    .filter((c) => c.method === 'answerCallbackQuery')
    .map((c) => (c.params.text as string | undefined) ?? '');
}

export const SETUP_CODE_RE = /gps_[A-Za-z0-9_-]{43}/;

/** The setup code in a bot message; fails the test when there is none. */
export function setupCodeIn(text: string): string {
  const m = SETUP_CODE_RE.exec(text);
  assert.ok(m, `no setup code in ${JSON.stringify(text)}`);
  return m[0];
}
