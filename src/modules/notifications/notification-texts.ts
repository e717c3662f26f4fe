import { formatUsd } from '../../vocabulary/money.js';
import { EVENT_OF_STATUS, type EventType } from '../events/event-types.js';
import type { StoredEvent } from '../events/events.repository.js';
import { NOTIFIED_STATUSES, type RentalStatus } from '../rentals/state/rental-status.js';
import type { NewNotification, RentalFacts } from './notifications.repository.js';

// What the bot tells an owner of each event, worded from what the event carries (the same events
// agents read) and, for a rental's status, what its key is called and how its charge stands now.

/** A notification found, with the event type the owner's /notify choice is about. */
export interface Found {
  type: EventType;
  n: NewNotification;
}

/** The rental statuses owners are told of, by the event each writes. */
const STATUS_OF_EVENT = new Map<EventType, RentalStatus>(NOTIFIED_STATUSES.map((s) => [EVENT_OF_STATUS[s]!, s]));

/** Whether `type` is a rental status change the owner is told of (its message names the key that started the rental). */
export function isStatusEvent(type: EventType): boolean {
  return STATUS_OF_EVENT.has(type);
}

/** What the messages use of a rental event's data: the rental as a read returns it (rentals/state/rental-events.ts). */
interface RentalEventData {
  rentalId: string;
  deploymentId: string | null;
  gpuName: string | null;
  endsAt: string | null;
  leaseSeconds: number | null;
  failureReason: string | null;
  reversalStatus: string | null;
  quote: { hourlyPriceMinor: number };
  deployment: { startedAt: string | null; hourlyPriceMinor: number } | null;
}

/** What an account event carries that the messages use (billing/account-events.ts writes it). */
interface AccountEventData {
  balance: { creditsMinor: number };
  amountMinor?: number;
  thresholdMinor?: number;
}

/**
 * The message `e` gives the owner's chat `chatId`, or null for an event the bot does not report.
 * `facts` are its rental's (status changes), `now` when it is told (an idle warning counts the
 * minutes left from it).
 */
export function notificationOf(
  e: StoredEvent,
  chatId: number,
  facts: RentalFacts | undefined,
  now: Date,
  idleGraceMs: number,
): Found | null {
  const base = { key: `event:${e.id}`, accountId: e.accountId, chatId };
  const status = STATUS_OF_EVENT.get(e.type);
  if (status) return rentalChanged(e, status, chatId, facts);
  if (e.type === 'topup.paid' || e.type === 'credits.low') return accountEvent(e, base);
  if (e.type === 'rental.expiring' || e.type === 'rental.idle_warning') return rentalEvent(e, base, now, idleGraceMs);
  return null;
}

type Base = Pick<NewNotification, 'key' | 'accountId' | 'chatId'>;

/** One message per event: the ledger writes `credits.low` once per crossing, not per debit under the threshold. */
function accountEvent(e: StoredEvent, base: Base): Found {
  const data = e.data as AccountEventData;
  const credits = formatUsd(data.balance.creditsMinor);
  if (e.type === 'topup.paid') {
    return {
      type: e.type,
      n: {
        ...base,
        kind: 'TOPUP_CREDITED',
        text: `💳 Top-up credited: +${formatUsd(data.amountMinor ?? 0)}. Your credits are now ${credits}.`,
      },
    };
  }
  return {
    type: e.type,
    n: {
      ...base,
      kind: 'LOW_CREDITS',
      text: `⚠️ Credits running low: ${credits} left (under ${formatUsd(data.thresholdMinor ?? 0)}). Running rentals stop when credits run out. Top up with /topup 20.`,
    },
  };
}

/**
 * One message per deployment and status (the key names the cause as the deployment scan before
 * the event log did, so a cause told then is not told again).
 */
function rentalChanged(e: StoredEvent, status: RentalStatus, chatId: number, facts: RentalFacts | undefined): Found {
  const data = e.data as RentalEventData;
  const what = data.gpuName ?? facts?.gpuModel ?? 'GPU machine';
  const who = facts?.keyName
    ? ` started by ${facts.keyKind === 'AGENT' ? 'agent ' : ''}"${facts.keyName}" (${facts.keyPrefix})`
    : '';
  const ref = `Rental ${data.rentalId}.`;
  let text: string;
  if (status === 'ACTIVE') {
    const hourly = data.deployment?.hourlyPriceMinor ?? data.quote.hourlyPriceMinor;
    text = `🟢 Rental is ACTIVE: ${what}${who}, ${formatUsd(hourly)}/h. ${ref} See /rentals.`;
  } else if (status === 'FAILED') {
    const reason = data.failureReason ? ` Reason: ${data.failureReason.replace(/\.+$/, '')}.` : '';
    // The charge as it stands when the owner is told: its reversal settles just after the failure.
    const reversalStatus = facts ? facts.reversalStatus : data.reversalStatus;
    const reversal =
      reversalStatus === 'SUCCEEDED'
        ? ' Its charge was reversed.'
        : reversalStatus === 'PENDING'
          ? ' Its charge is being reversed.'
          : '';
    text = `🔴 Rental FAILED: ${what}${who}.${reason}${reversal} ${ref}`;
  } else {
    text = `⚪ Rental TERMINATED: ${what}${who}. The machine is gone and billing has stopped. ${ref}`;
  }
  const n = {
    key: `deployment:${data.deploymentId ?? data.rentalId}:${status}`,
    kind: `RENTAL_${status}`,
    accountId: e.accountId,
    chatId,
    text,
  };
  return { type: e.type, n };
}

function rentalEvent(e: StoredEvent, base: Base, now: Date, idleGraceMs: number): Found {
  const data = e.data as RentalEventData;
  const what = `${data.gpuName ?? 'GPU machine'} (rental ${data.rentalId})`;
  if (e.type === 'rental.expiring') {
    const endsAt = data.endsAt ? new Date(data.endsAt) : null;
    const when = endsAt
      ? ` ends at ${endsAt.toISOString().slice(11, 16)} UTC (${endsByLease(data, endsAt) ? 'lease' : 'prepaid'} end)`
      : ' ends soon';
    return {
      type: e.type,
      n: {
        ...base,
        kind: 'RENTAL_EXPIRING',
        text: `⏳ Rental ending soon: ${what}${when}. Save your work now. See /rentals.`,
      },
    };
  }
  // Counted from the warning, so a message collected late does not promise more time than is left.
  const left = e.createdAt.getTime() + idleGraceMs - now.getTime();
  const minutes = Math.max(1, Math.ceil(left / 60_000));
  return {
    type: e.type,
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
