import type { DataSource } from 'typeorm';
import type { Clock } from '../../clock.js';
import { readMinor } from '../../db/columns.js';
import { inTransaction } from '../../db/transaction.js';
import type { JobQueue, JobWakeUp } from '../../jobs/job-queue.js';
import type { Logger } from '../../logger.js';
import { formatUsd } from '../billing/money.js';
import { NotificationsRepository, type LowCreditCrossing, type NewNotification, type RentalChange, type TopupCredit } from './notifications.repository.js';

/** Delivers one message to a Telegram chat (the bot role's Bot API client, in production). */
export interface NotificationSender {
  /**
   * Resolves `sent`, or `undeliverable` when the chat can never receive it (the owner blocked the
   * bot, the chat is gone); throws on anything that may succeed later.
   */
  send(chatId: number, text: string): Promise<'sent' | 'undeliverable'>;
}

export interface NotificationsOptions {
  /** Balance under which a debit that crosses it triggers a "credits running low" message, in cents. */
  lowCreditsMinor: number;
  /** How far back the very first scan looks, so a fresh deployment does not replay all history. */
  initialLookbackMs?: number;
  /** Each scan re-reads this much before its cursor: rows committed late still get seen once. */
  overlapMs?: number;
  /** A send that failed but may succeed later is tried again after this long. */
  retryAfterMs?: number;
  /** Tries of one notification before it is given up on. */
  maxAttempts?: number;
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
 * createNotificationJobs): `collect` scans top-up credits, rental state changes and low-credit
 * debits since a persisted cursor and records one row per cause under a unique key, with one
 * `notifications.deliver` job for each new row in the same transaction (so a cause is recorded
 * and enqueued once however often it is scanned); `deliver` sends one row and marks it sent. A
 * crash between sending and marking repeats one message (the job runs again), never loses it.
 */
export class NotificationsService {
  private readonly opts: Required<NotificationsOptions>;
  private readonly repo: NotificationsRepository;

  constructor(
    private readonly ds: DataSource,
    private readonly clock: Clock,
    private readonly logger: Logger,
    /** Where deliver jobs are enqueued: the bot role's own queue, so its processor wakes at once. */
    private readonly jobs: JobQueue,
    options: NotificationsOptions,
  ) {
    this.opts = { initialLookbackMs: 24 * 3600_000, overlapMs: 5 * 60_000, retryAfterMs: 60_000, maxAttempts: 5, ...options };
    this.repo = new NotificationsRepository(ds);
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
    const pending = [
      ...(await this.repo.topupCredits(since)).map(topupCredited),
      ...(await this.repo.rentalChanges(since)).map(rentalChanged),
      ...(await this.repo.lowCreditCrossings(since, this.opts.lowCreditsMinor)).map((r) => creditsLow(r, this.opts.lowCreditsMinor)),
    ];
    let created = 0;
    for (const n of pending) {
      const wake = await inTransaction(this.ds, async (m): Promise<JobWakeUp | null> => {
        const id = await this.repo.record(m, n, now);
        return id === null ? null : this.jobs.nowIn(m, 'notifications.deliver', { notificationId: id }, { uniqueKey: id });
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

function topupCredited(r: TopupCredit): NewNotification {
  return {
    key: `topup:${r.id}`,
    kind: 'TOPUP_CREDITED',
    accountId: r.account_id,
    chatId: Number(r.chat_id),
    text: `💳 Top-up credited: +${formatUsd(readMinor(r.amount_minor))}. Your credits are now ${formatUsd(readMinor(r.balance_after_minor))}.`,
  };
}

function rentalChanged(r: RentalChange): NewNotification {
  const what = r.offer_name ?? r.gpu_model ?? 'GPU machine';
  const who = r.key_name ? ` started by ${r.key_kind === 'AGENT' ? 'agent ' : ''}"${r.key_name}" (${r.key_prefix})` : '';
  const ref = `Rental ${r.order_id}.`;
  let text: string;
  if (r.status === 'ACTIVE') {
    text = `🟢 Rental is ACTIVE: ${what}${who}, ${formatUsd(readMinor(r.hourly_price_minor))}/h. ${ref} See /rentals.`;
  } else if (r.status === 'FAILED') {
    const reason = r.failure_reason ? ` Reason: ${r.failure_reason.replace(/\.+$/, '')}.` : '';
    const reversal = r.reversal_status === 'SUCCEEDED' ? ' Its charge was reversed.' : r.reversal_status === 'PENDING' ? ' Its charge is being reversed.' : '';
    text = `🔴 Rental FAILED: ${what}${who}.${reason}${reversal} ${ref}`;
  } else {
    text = `⚪ Rental TERMINATED: ${what}${who}. The machine is gone and billing has stopped. ${ref}`;
  }
  return { key: `deployment:${r.id}:${r.status}`, kind: `RENTAL_${r.status}`, accountId: r.account_id, chatId: Number(r.chat_id), text };
}

/** One message per crossing below the threshold, not one per debit while below it (the scan picks crossings). */
function creditsLow(r: LowCreditCrossing, thresholdMinor: number): NewNotification {
  return {
    key: `low-credits:${r.id}`,
    kind: 'LOW_CREDITS',
    accountId: r.account_id,
    chatId: Number(r.chat_id),
    text:
      `⚠️ Credits running low: ${formatUsd(readMinor(r.balance_after_minor))} left (under ${formatUsd(thresholdMinor)}). ` +
      'Running rentals stop when credits run out. Top up with /topup 20.',
  };
}
