import type { Clock } from '../../clock.js';
import type { Store } from '../../db/store.js';
import type { JobOutboxRepository } from '../../jobs/job-outbox.repository.js';
import type { JobQueue, JobWakeUp } from '../../jobs/job-queue.js';
import type { Logger } from '../../logger.js';
import type { AccountsRepository } from '../accounts/accounts.repository.js';
import { DurableCursor, EventTail, type BatchWrites, type EventLogRepositories } from '../events/event-tail.js';
import type { StoredEvent } from '../events/events.repository.js';
import type { RentalsRepository } from '../rentals/store/rentals.repository.js';
import type { TelegramRepository } from '../telegram/telegram.repository.js';
import { isStatusEvent, notificationOf, type Found } from './notification-texts.js';
import type { RentalFacts } from './notifications.repository.js';
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

/**
 * What notifications read and write: the event log and its cursor, the owners' chats and the keys
 * that started rentals (accounts), the rentals' orders, the notifications and /notify choices
 * (Telegram), and the deliver jobs written with them.
 */
export interface NotificationsRepositories extends EventLogRepositories {
  accounts: AccountsRepository;
  rentals: RentalsRepository;
  telegram: TelegramRepository;
  jobs: JobOutboxRepository;
}

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
  private readonly tail: EventTail<NotificationsRepositories>;
  /** What each owner's chat chose to be told about (/notify). */
  readonly preferences: NotifyPreferences;

  constructor(
    private readonly store: Store<NotificationsRepositories>,
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
    this.preferences = new NotifyPreferences(store, clock);
    const start = () =>
      store.read((r) => r.events.lastIdBefore(new Date(clock.now().getTime() - this.opts.initialLookbackMs)));
    this.tail = new EventTail(store, new DurableCursor(store, CURSOR, start), { name: CURSOR, batch: BATCH, logger });
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
  private async notify(
    events: readonly StoredEvent[],
    pass: { created: number },
  ): Promise<BatchWrites<NotificationsRepositories>> {
    const now = this.clock.now();
    const told = events.filter((e) => NOTIFIABLE_EVENT_TYPES.includes(e.type));
    const chats = await this.store.read((r) => r.accounts.telegramChatsOf(told.map((e) => e.accountId)));
    const owned = told.filter((e) => chats.has(e.accountId));
    const facts = await this.rentalFacts(
      owned.filter((e) => isStatusEvent(e.type) && e.rentalId !== null).map((e) => e.rentalId!),
    );
    const found = owned
      .map((e) => notificationOf(e, chats.get(e.accountId)!, facts.get(e.rentalId ?? ''), now, this.opts.idleGraceMs))
      .filter((f): f is Found => f !== null);
    const chosen = await this.preferences.ofChats([...new Set(found.map((f) => f.n.chatId))]);
    return async (r) => {
      const wakes: JobWakeUp[] = [];
      for (const f of found) {
        if (!chosen.get(f.n.chatId)!.includes(f.type)) {
          await r.telegram.notifications.recordSkipped(f.n, now);
          continue;
        }
        const id = await r.telegram.notifications.record(f.n, now);
        if (id !== null)
          wakes.push(await this.jobs.nowIn(r.jobs, 'notifications.deliver', { notificationId: id }, { uniqueKey: id }));
      }
      return async () => {
        pass.created += wakes.length;
        for (const wake of wakes) await wake();
      };
    };
  }

  /**
   * The {@link RentalFacts} of each of `rentalIds` as they stand now: the orders, then the keys that
   * started them, two reads for a whole batch.
   */
  private async rentalFacts(rentalIds: readonly string[]): Promise<Map<string, RentalFacts>> {
    if (rentalIds.length === 0) return new Map();
    const orders = await this.store.read((r) => r.rentals.notificationFacts(rentalIds));
    const keyIds = [...orders.values()].flatMap((o) => (o.keyId === null ? [] : [o.keyId]));
    const keys = await this.store.read((r) => r.accounts.keyLabelsOf(keyIds));
    return new Map(
      [...orders].map(([id, o]) => {
        const key = o.keyId === null ? undefined : keys.get(o.keyId);
        return [
          id,
          {
            gpuModel: o.gpuModel,
            reversalStatus: o.reversalStatus,
            keyName: key?.name ?? null,
            keyPrefix: key?.prefix ?? null,
            keyKind: key?.kind ?? null,
          },
        ];
      }),
    );
  }

  /**
   * Sends notification `id` (the deliver job's handler). Safe to run again: a row already sent or
   * given up on is left alone. A failure that may pass is recorded and thrown while tries remain.
   */
  async deliver(id: string, sender: NotificationSender): Promise<DeliveryOutcome> {
    const n = await this.store.read((r) => r.telegram.notifications.pending(id));
    if (!n) return 'done-before';
    const now = this.clock.now();
    const attempt = n.attempts + 1;
    await this.store.read((r) => r.telegram.notifications.startAttempt(id, now));
    let outcome: 'sent' | 'undeliverable';
    try {
      outcome = await sender.send(n.chatId, n.text);
    } catch (err) {
      const giveUp = attempt >= this.opts.maxAttempts;
      const error = String((err as Error)?.message ?? err);
      await this.store.read((r) => r.telegram.notifications.markFailedAttempt(id, error, giveUp ? now : null));
      this.logger.warn({ notificationId: id, attempt, giveUp }, 'telegram notification not delivered');
      if (giveUp) return 'given-up';
      throw err;
    }
    if (outcome === 'sent') await this.store.read((r) => r.telegram.notifications.markSent(id, now));
    else await this.store.read((r) => r.telegram.notifications.markFailedAttempt(id, 'chat unreachable', now));
    return outcome;
  }
}
