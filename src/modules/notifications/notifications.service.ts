import type { DataSource } from 'typeorm';
import type { Clock } from '../../clock.js';
import { readMinor } from '../../db/columns.js';
import { inTransaction } from '../../db/transaction.js';
import type { JobQueue, JobWakeUp } from '../../jobs/job-queue.js';
import type { Logger } from '../../logger.js';
import { formatUsd } from '../billing/money.js';
import type { EventType } from '../events/event-types.js';
import {
  NotificationsRepository,
  type AccountEventRow,
  type NewNotification,
  type RentalChange,
  type RentalEventRow,
} from './notifications.repository.js';
import { NotifyPreferences } from './notify-preferences.js';

/** Delivers one message to a Telegram chat (the bot role's Bot API client, in production). */
export interface NotificationSender {
  /**
   * Resolves `sent`, or `undeliverable` when the chat can never receive it (the owner blocked the
   * bot, the chat is gone); throws on anything that may succeed later.
   */
  send(chatId: number, text: string): Promise<'sent' | 'undeliverable'>;
}

export interface NotificationsOptions {
  /** How far back the very first scan looks, so a fresh deployment does not replay all history. */
  initialLookbackMs?: number;
  /** Each scan re-reads this much before its cursor: rows committed late still get seen once. */
  overlapMs?: number;
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

/**
 * Owner notifications in Telegram, derived from MySQL alone so they work whichever process
 * caused the event. Both halves run as jobs of the bot role (src/container.ts,
 * createNotificationJobs): `collect` reads the event log's `topup.paid`, `credits.low`,
 * `rental.expiring` and `rental.idle_warning` and scans
 * rental state changes since a persisted cursor, keeps those of the types the owner's chat chose
 * (/notify), and records one row per cause under a unique key, with one
 * `notifications.deliver` job for each new row in the same transaction (so a cause is recorded
 * and enqueued once however often it is scanned); `deliver` sends one row and marks it sent. A
 * crash between sending and marking repeats one message (the job runs again), never loses it.
 */
export class NotificationsService {
  private readonly opts: Required<NotificationsOptions>;
  private readonly repo: NotificationsRepository;
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
      overlapMs: 5 * 60_000,
      retryAfterMs: 60_000,
      maxAttempts: 5,
      idleGraceMs: 600_000,
      ...options,
    };
    this.repo = new NotificationsRepository(ds);
    this.preferences = new NotifyPreferences(ds, clock);
  }

  /** How the deliver job retries a send that failed and may pass: the one setting of both. */
  get retry(): { delayMs: number; attempts: number } {
    return { delayMs: this.opts.retryAfterMs, attempts: this.opts.maxAttempts };
  }

  /** Records notifications for everything that happened since the cursor and enqueues their delivery; returns how many are new. */
  async collect(): Promise<number> {
    const now = this.clock.now();
    const cursor = (await this.repo.cursor(CURSOR)) ?? new Date(now.getTime() - this.opts.initialLookbackMs);
    const since = new Date(cursor.getTime() - this.opts.overlapMs);
    const found = [
      ...(await this.repo.accountEvents(since, ACCOUNT_EVENT_TYPES)).map(accountEvent),
      ...(await this.repo.rentalChanges(since)).map(rentalChanged),
      ...(await this.repo.rentalEvents(since, RENTAL_EVENT_TYPES)).map((r) =>
        rentalEvent(r, now, this.opts.idleGraceMs),
      ),
    ];
    const chosen = await this.preferences.ofChats([...new Set(found.map((f) => f.n.chatId))]);
    const pending: NewNotification[] = [];
    for (const f of found) {
      if (chosen.get(f.n.chatId)!.includes(f.type)) pending.push(f.n);
      else await this.repo.recordSkipped(f.n, now);
    }
    let created = 0;
    for (const n of pending) {
      const wake = await inTransaction(this.ds, async (m): Promise<JobWakeUp | null> => {
        const id = await this.repo.record(m, n, now);
        return id === null
          ? null
          : this.jobs.nowIn(m, 'notifications.deliver', { notificationId: id }, { uniqueKey: id });
      });
      if (wake) {
        created++;
        await wake();
      }
    }
    await this.repo.advanceCursor(CURSOR, now);
    return created;
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

/** A notification found, with the event type the owner's /notify choice is about. */
interface Found {
  type: EventType;
  n: NewNotification;
}

/** The account events the bot reports, read from the event log. */
const ACCOUNT_EVENT_TYPES: readonly EventType[] = ['topup.paid', 'credits.low'];

/** What an account event carries that the messages use (billing/account-events.ts writes it). */
interface AccountEventData {
  balance: { creditsMinor: number };
  amountMinor?: number;
  thresholdMinor?: number;
}

/** One message per event: the ledger writes `credits.low` once per crossing, not per debit under the threshold. */
function accountEvent(r: AccountEventRow): Found {
  const data = (typeof r.data === 'string' ? JSON.parse(r.data) : r.data) as AccountEventData;
  const credits = formatUsd(data.balance.creditsMinor);
  const base = { key: `event:${r.id}`, accountId: r.account_id, chatId: Number(r.chat_id) };
  if (r.type === 'topup.paid') {
    return {
      type: r.type,
      n: {
        ...base,
        kind: 'TOPUP_CREDITED',
        text: `💳 Top-up credited: +${formatUsd(data.amountMinor ?? 0)}. Your credits are now ${credits}.`,
      },
    };
  }
  return {
    type: r.type,
    n: {
      ...base,
      kind: 'LOW_CREDITS',
      text: `⚠️ Credits running low: ${credits} left (under ${formatUsd(data.thresholdMinor ?? 0)}). Running rentals stop when credits run out. Top up with /topup 20.`,
    },
  };
}

function rentalChanged(r: RentalChange): Found {
  const what = r.offer_name ?? r.gpu_model ?? 'GPU machine';
  const who = r.key_name
    ? ` started by ${r.key_kind === 'AGENT' ? 'agent ' : ''}"${r.key_name}" (${r.key_prefix})`
    : '';
  const ref = `Rental ${r.order_id}.`;
  let text: string;
  if (r.status === 'ACTIVE') {
    text = `🟢 Rental is ACTIVE: ${what}${who}, ${formatUsd(readMinor(r.hourly_price_minor))}/h. ${ref} See /rentals.`;
  } else if (r.status === 'FAILED') {
    const reason = r.failure_reason ? ` Reason: ${r.failure_reason.replace(/\.+$/, '')}.` : '';
    const reversal =
      r.reversal_status === 'SUCCEEDED'
        ? ' Its charge was reversed.'
        : r.reversal_status === 'PENDING'
          ? ' Its charge is being reversed.'
          : '';
    text = `🔴 Rental FAILED: ${what}${who}.${reason}${reversal} ${ref}`;
  } else {
    text = `⚪ Rental TERMINATED: ${what}${who}. The machine is gone and billing has stopped. ${ref}`;
  }
  const n = {
    key: `deployment:${r.id}:${r.status}`,
    kind: `RENTAL_${r.status}`,
    accountId: r.account_id,
    chatId: Number(r.chat_id),
    text,
  };
  return { type: `rental.${r.status.toLowerCase()}` as EventType, n };
}

/** The rental events the bot reports, read from the event log (the lifecycle writes each once per rental or idle spell). */
const RENTAL_EVENT_TYPES: readonly EventType[] = ['rental.expiring', 'rental.idle_warning'];

/** What a rental event carries that the messages use: the rental as a read returns it (rental-events.ts). */
interface RentalEventData {
  rentalId: string;
  gpuName: string | null;
  endsAt: string | null;
  leaseSeconds: number | null;
  deployment: { startedAt: string | null } | null;
}

function rentalEvent(r: RentalEventRow, now: Date, idleGraceMs: number): Found {
  const data = (typeof r.data === 'string' ? JSON.parse(r.data) : r.data) as RentalEventData;
  const what = `${data.gpuName ?? 'GPU machine'} (rental ${data.rentalId})`;
  const base = { key: `event:${r.id}`, accountId: r.account_id, chatId: Number(r.chat_id) };
  if (r.type === 'rental.expiring') {
    const endsAt = data.endsAt ? new Date(data.endsAt) : null;
    const when = endsAt
      ? ` ends at ${endsAt.toISOString().slice(11, 16)} UTC (${endsByLease(data, endsAt) ? 'lease' : 'prepaid'} end)`
      : ' ends soon';
    return {
      type: r.type,
      n: {
        ...base,
        kind: 'RENTAL_EXPIRING',
        text: `⏳ Rental ending soon: ${what}${when}. Save your work now. See /rentals.`,
      },
    };
  }
  // Counted from the warning, so a message collected late does not promise more time than is left.
  const left = new Date(r.created_at).getTime() + idleGraceMs - now.getTime();
  const minutes = Math.max(1, Math.ceil(left / 60_000));
  return {
    type: r.type,
    n: {
      ...base,
      kind: 'RENTAL_IDLE_WARNING',
      text: `💤 Rental idle: ${what}: its GPUs have been idle; it will be stopped in ${minutes} minute${minutes === 1 ? '' : 's'} unless they get busy.`,
    },
  };
}

/** A rental ends by its lease when the lease, counted from ACTIVE, is what sets its end; else by its prepaid purchase. */
function endsByLease(data: RentalEventData, endsAt: Date): boolean {
  const startedAt = data.deployment?.startedAt;
  if (data.leaseSeconds === null || !startedAt) return data.leaseSeconds !== null;
  return new Date(startedAt).getTime() + data.leaseSeconds * 1000 <= endsAt.getTime();
}
