import type { DataSource } from 'typeorm';
import type { Clock } from '../../clock.js';
import { readMinor } from '../../db/columns.js';
import { formatUsd } from '../billing/money.js';
import { NOTIFIED_STATUSES, type RentalStatus } from '../rentals/rental-state.js';
import type { Logger } from '../../logger.js';

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
  /** A claimed but unconfirmed send is retried after this long (crash or transient error). */
  retryAfterMs?: number;
  maxAttempts?: number;
  batchSize?: number;
}

export interface DeliveryResult {
  sent: number;
  failed: number;
  retrying: number;
}

const CURSOR = 'owner-notifications';

/**
 * Owner notifications in Telegram, derived from MySQL alone so they work whichever process
 * caused the event: `collect` scans top-up credits, rental state changes and low-credit debits
 * since a persisted cursor and records one row per cause under a unique key (so a cause is
 * recorded once however often it is scanned); `deliver` claims pending rows and sends them,
 * marking each sent. A crash between sending and marking can repeat one message, never lose it.
 */
export class NotificationsService {
  private readonly opts: Required<NotificationsOptions>;

  constructor(
    private readonly ds: DataSource,
    private readonly clock: Clock,
    private readonly logger: Logger,
    options: NotificationsOptions,
  ) {
    this.opts = {
      initialLookbackMs: 24 * 3600_000,
      overlapMs: 5 * 60_000,
      retryAfterMs: 60_000,
      maxAttempts: 5,
      batchSize: 50,
      ...options,
    };
  }

  /** One scan and one delivery round; what the bot role runs on a timer and tests call directly. */
  async runOnce(sender: NotificationSender): Promise<DeliveryResult> {
    await this.collect();
    return this.deliver(sender);
  }

  /** Records notifications for everything that happened since the cursor; returns how many are new. */
  async collect(): Promise<number> {
    const now = this.clock.now();
    const rows: { position: Date }[] = await this.ds.query('SELECT position FROM telegram_cursors WHERE name = ?', [CURSOR]);
    const cursor = rows[0] ? new Date(rows[0].position) : new Date(now.getTime() - this.opts.initialLookbackMs);
    const since = new Date(cursor.getTime() - this.opts.overlapMs);
    const pending = [...(await this.topups(since)), ...(await this.rentals(since)), ...(await this.lowCredits(since))];
    let created = 0;
    for (const n of pending) {
      const res = await this.ds.query(
        `INSERT INTO telegram_notifications (notify_key, account_id, chat_id, kind, text, created_at, attempts)
         VALUES (?, ?, ?, ?, ?, ?, 0) ON DUPLICATE KEY UPDATE notify_key = notify_key`,
        [n.key, n.accountId, n.chatId, n.kind, n.text, now],
      );
      // MySQL reports 1 affected row for an insert and 0 for an unchanged duplicate.
      if (Number(res.affectedRows) === 1) created++;
    }
    await this.ds.query(
      'INSERT INTO telegram_cursors (name, position) VALUES (?, ?) ON DUPLICATE KEY UPDATE position = GREATEST(position, VALUES(position))',
      [CURSOR, now],
    );
    return created;
  }

  /** Sends what is pending, oldest first. */
  async deliver(sender: NotificationSender): Promise<DeliveryResult> {
    const result: DeliveryResult = { sent: 0, failed: 0, retrying: 0 };
    const now = this.clock.now();
    const staleClaim = new Date(now.getTime() - this.opts.retryAfterMs);
    const due: { id: string | number; chat_id: number | string; text: string; attempts: number }[] = await this.ds.query(
      `SELECT id, chat_id, text, attempts FROM telegram_notifications
        WHERE sent_at IS NULL AND failed_at IS NULL AND (claimed_at IS NULL OR claimed_at < ?)
        ORDER BY id LIMIT ?`,
      [staleClaim, this.opts.batchSize],
    );
    for (const n of due) {
      // The claim makes a second dispatcher (or an overlapping run) skip this row.
      const claim = await this.ds.query(
        `UPDATE telegram_notifications SET claimed_at = ?, attempts = attempts + 1
          WHERE id = ? AND sent_at IS NULL AND failed_at IS NULL AND (claimed_at IS NULL OR claimed_at < ?)`,
        [now, n.id, staleClaim],
      );
      if (Number(claim.affectedRows) !== 1) continue;
      let outcome: 'sent' | 'undeliverable';
      try {
        outcome = await sender.send(Number(n.chat_id), n.text);
      } catch (err) {
        const giveUp = n.attempts + 1 >= this.opts.maxAttempts;
        await this.ds.query('UPDATE telegram_notifications SET last_error = ?, failed_at = ? WHERE id = ?', [
          String((err as Error)?.message ?? err).slice(0, 255),
          giveUp ? now : null,
          n.id,
        ]);
        this.logger.warn({ notificationId: n.id, attempt: n.attempts + 1, giveUp }, 'telegram notification not delivered');
        if (giveUp) result.failed++;
        else result.retrying++;
        continue;
      }
      if (outcome === 'sent') {
        await this.ds.query('UPDATE telegram_notifications SET sent_at = ? WHERE id = ?', [now, n.id]);
        result.sent++;
      } else {
        await this.ds.query('UPDATE telegram_notifications SET failed_at = ?, last_error = ? WHERE id = ?', [now, 'chat unreachable', n.id]);
        result.failed++;
      }
    }
    return result;
  }

  /** Runs `runOnce` every `intervalMs` until stopped; errors are logged, never thrown. */
  start(sender: NotificationSender, intervalMs: number): { stop(): Promise<void> } {
    let running: Promise<unknown> | null = null;
    const tick = () => {
      if (running) return;
      running = this.runOnce(sender)
        .catch((err) => this.logger.error({ err }, 'telegram notifications round failed'))
        .finally(() => {
          running = null;
        });
    };
    const timer = setInterval(tick, intervalMs);
    tick();
    return {
      async stop() {
        clearInterval(timer);
        if (running) await running;
      },
    };
  }

  private async topups(since: Date): Promise<Pending[]> {
    const rows: { id: string | number; account_id: string; chat_id: number | string; amount_minor: number | string; balance_after_minor: number | string }[] =
      await this.ds.query(
        `SELECT e.id, e.account_id, a.telegram_chat_id AS chat_id, e.amount_minor, e.balance_after_minor
           FROM ledger_entries e JOIN accounts a ON a.id = e.account_id
          WHERE e.created_at >= ? AND e.kind = 'TOPUP' AND e.amount_minor > 0 AND a.telegram_chat_id IS NOT NULL`,
        [since],
      );
    return rows.map((r) => ({
      key: `topup:${r.id}`,
      kind: 'TOPUP_CREDITED',
      accountId: r.account_id,
      chatId: Number(r.chat_id),
      text: `💳 Top-up credited: +${formatUsd(readMinor(r.amount_minor))}. Your credits are now ${formatUsd(readMinor(r.balance_after_minor))}.`,
    }));
  }

  private async rentals(since: Date): Promise<Pending[]> {
    const rows: {
      id: string;
      order_id: string;
      status: RentalStatus;
      account_id: string;
      chat_id: number | string;
      key_name: string | null;
      key_prefix: string | null;
      key_kind: string | null;
      offer_name: string | null;
      gpu_model: string | null;
      failure_reason: string | null;
      reversal_status: string | null;
      hourly_price_minor: number | string;
    }[] = await this.ds.query(
      `SELECT d.id, d.order_id, d.status, d.account_id, a.telegram_chat_id AS chat_id, d.hourly_price_minor,
              k.name AS key_name, k.prefix AS key_prefix, k.kind AS key_kind, f.name AS offer_name,
              o.gpu_model, o.failure_reason, o.reversal_status
         FROM deployments d
         JOIN accounts a ON a.id = d.account_id
         LEFT JOIN api_keys k ON k.id = d.key_id
         LEFT JOIN orders o ON o.id = d.order_id
         LEFT JOIN offers f ON f.id = COALESCE(d.offer_id, o.offer_id)
        WHERE (d.status_changed_at >= ? OR (d.status_changed_at IS NULL AND d.updated_at >= ?))
          AND d.status IN (?) AND a.telegram_chat_id IS NOT NULL`,
      [since, since, NOTIFIED_STATUSES],
    );
    return rows.map((r) => {
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
    });
  }

  private async lowCredits(since: Date): Promise<Pending[]> {
    const t = this.opts.lowCreditsMinor;
    const rows: { id: string | number; account_id: string; chat_id: number | string; balance_after_minor: number | string }[] = await this.ds.query(
      `SELECT e.id, e.account_id, a.telegram_chat_id AS chat_id, e.balance_after_minor
         FROM ledger_entries e JOIN accounts a ON a.id = e.account_id
        WHERE e.created_at >= ? AND e.amount_minor < 0 AND e.balance_after_minor < ?
          AND e.balance_after_minor - e.amount_minor >= ? AND a.telegram_chat_id IS NOT NULL`,
      [since, t, t],
    );
    // One message per crossing below the threshold, not one per debit while below it.
    return rows.map((r) => ({
      key: `low-credits:${r.id}`,
      kind: 'LOW_CREDITS',
      accountId: r.account_id,
      chatId: Number(r.chat_id),
      text:
        `⚠️ Credits running low: ${formatUsd(readMinor(r.balance_after_minor))} left (under ${formatUsd(t)}). ` +
        'Running rentals stop when credits run out. Top up with /topup 20.',
    }));
  }
}

interface Pending {
  key: string;
  kind: string;
  accountId: string;
  chatId: number;
  text: string;
}
