import { MysqlJobOutboxRepository } from '../../jobs/job-outbox.repository.js';
import type { DataSource, EntityManager } from 'typeorm';
import type { Clock } from '../../clock.js';
import type { JobQueue, JobWakeUp } from '../../jobs/job-queue.js';
import type { Logger } from '../../logger.js';
import { DurableCursor, EventTail, type BatchWrites } from '../events/event-tail.js';
import { lastEventIdBefore, type StoredEvent } from '../events/events.repository.js';
import { isStatusEvent, notificationOf, type Found } from './notification-texts.js';
import { NotificationsRepository } from './notifications.repository.js';
import { NOTIFIABLE_EVENT_TYPES, NotifyPreferences } from './notify-preferences.js';

/** Delivers one message to a Telegram chat (the bot role's Bot API client, in production). */
export interface NotificationSender {
  /**
   * Resolves `sent`, or `undeliverable` when the chat can never receive it (the owner blocked the
   * bot, the chat is gone); throws on anything that may succeed later.
   */
  send(chatId: number, text: string): Promise<'sent' | 'undeliverable'>;
}

export interface NotificationsOptions {
  /** How far back the very first pass looks, so a fresh deployment does not replay all history. */
  initialLookbackMs?: number;
  /** A send that failed but may succeed later is tried again after this long. */
  retryAfterMs?: number;
  /** Tries of one notification before it is given up on. */
  maxAttempts?: number;
  /** How long a rental warned as idle may stay idle before it is stopped (IDLE_GRACE_SECONDS). */
  idleGraceMs?: number;
}

/**
 * What one delivery run did: `sent`; `undeliverable` (the chat can never receive it);
 * `given-up` (a failure on the last try); `done-before` (sent or given up on by an earlier run,
 * so nothing was sent again). A failure that may pass is thrown, for the job to be retried.
 */
export type DeliveryOutcome = 'sent' | 'undeliverable' | 'given-up' | 'done-before';

const CURSOR = 'owner-notifications';
/** Events read per batch. */
const BATCH = 200;

/**
 * Owner notifications in Telegram, made from the event log (the events agents read), so they
 * work whichever process caused the event. Both halves run as jobs of the bot role
 * (src/container.ts, createBotJobs): `collect` consumes the log under cursor
 * `owner-notifications` (events/event-tail.ts), keeps the events of the types the owner's chat
 * chose (/notify), and records one row per cause under a unique key, with one
 * `notifications.deliver` job for each new row, in the transaction that moves the cursor (so a
 * cause is recorded and enqueued once however often it is met); `deliver` sends one row and marks
 * it sent. A crash between sending and marking repeats one message (the job runs again), never
 * loses it.
 */
export class NotificationsService {
  private readonly opts: Required<NotificationsOptions>;
  private readonly repo: NotificationsRepository;
  private readonly tail: EventTail<EntityManager>;
  /** What each owner's chat chose to be told about (/notify). */
  readonly preferences: NotifyPreferences;

  constructor(
    private readonly ds: DataSource,
    private readonly clock: Clock,
    private readonly logger: Logger,
    /** Where deliver jobs are enqueued: the bot role's own queue, so its processor wakes at once. */
    private readonly jobs: JobQueue,
    options: NotificationsOptions,
  ) {
    this.opts = {
      initialLookbackMs: 24 * 3600_000,
      retryAfterMs: 60_000,
      maxAttempts: 5,
      idleGraceMs: 600_000,
      ...options,
    };
    this.repo = new NotificationsRepository(ds);
    this.preferences = new NotifyPreferences(ds, clock);
    const start = () => lastEventIdBefore(ds, new Date(clock.now().getTime() - this.opts.initialLookbackMs));
    this.tail = new EventTail(ds, new DurableCursor(ds, CURSOR, start), { name: CURSOR, batch: BATCH, logger });
  }

  /** How the deliver job retries a send that failed and may pass: the one setting of both. */
  get retry(): { delayMs: number; attempts: number } {
    return { delayMs: this.opts.retryAfterMs, attempts: this.opts.maxAttempts };
  }

  /** Records notifications for every event since the cursor and enqueues their delivery; returns how many are new. */
  async collect(): Promise<number> {
    const pass = { created: 0 };
    await this.tail.drain((events) => this.notify(events, pass));
    return pass.created;
  }

  /** The notifications of a batch: read with no lock held, recorded with the cursor's move. */
  private async notify(events: readonly StoredEvent[], pass: { created: number }): Promise<BatchWrites<EntityManager>> {
    const now = this.clock.now();
    const told = events.filter((e) => NOTIFIABLE_EVENT_TYPES.includes(e.type));
    const chats = await this.repo.chatsOf(told.map((e) => e.accountId));
    const owned = told.filter((e) => chats.has(e.accountId));
    const facts = await this.repo.rentalFacts(
      owned.filter((e) => isStatusEvent(e.type) && e.rentalId !== null).map((e) => e.rentalId!),
    );
    const found = owned
      .map((e) => notificationOf(e, chats.get(e.accountId)!, facts.get(e.rentalId ?? ''), now, this.opts.idleGraceMs))
      .filter((f): f is Found => f !== null);
    const chosen = await this.preferences.ofChats([...new Set(found.map((f) => f.n.chatId))]);
    return async (m) => {
      const wakes: JobWakeUp[] = [];
      for (const f of found) {
        if (!chosen.get(f.n.chatId)!.includes(f.type)) {
          await this.repo.recordSkipped(m, f.n, now);
          continue;
        }
        const id = await this.repo.record(m, f.n, now);
        if (id !== null)
          wakes.push(
            await this.jobs.nowIn(
              new MysqlJobOutboxRepository(m),
              'notifications.deliver',
              { notificationId: id },
              { uniqueKey: id },
            ),
          );
      }
      return async () => {
        pass.created += wakes.length;
        for (const wake of wakes) await wake();
      };
    };
  }

  /**
   * Sends notification `id` (the deliver job's handler). Safe to run again: a row already sent or
   * given up on is left alone. A failure that may pass is recorded and thrown while tries remain.
   */
  async deliver(id: string, sender: NotificationSender): Promise<DeliveryOutcome> {
    const n = await this.repo.pending(id);
    if (!n) return 'done-before';
    const now = this.clock.now();
    const attempt = n.attempts + 1;
    await this.repo.startAttempt(id, now);
    let outcome: 'sent' | 'undeliverable';
    try {
      outcome = await sender.send(n.chatId, n.text);
    } catch (err) {
      const giveUp = attempt >= this.opts.maxAttempts;
      await this.repo.markFailedAttempt(id, String((err as Error)?.message ?? err), giveUp ? now : null);
      this.logger.warn({ notificationId: id, attempt, giveUp }, 'telegram notification not delivered');
      if (giveUp) return 'given-up';
      throw err;
    }
    if (outcome === 'sent') await this.repo.markSent(id, now);
    else await this.repo.markFailedAttempt(id, 'chat unreachable', now);
    return outcome;
  }
}
