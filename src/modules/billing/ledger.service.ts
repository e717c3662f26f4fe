import type { DataSource, EntityManager } from 'typeorm';
import type { Clock } from '../../clock.js';
import { inOpenTransaction, type Sql } from '../../db/sql.js';
import { AppError } from '../../errors/app-error.js';
import type { Account } from '../accounts/account.entity.js';
import { crossesLow, DEFAULT_LOW_CREDITS_MINOR, recordAccountEvent } from './account-events.js';
import { lockAccount, lockAccountBalances } from '../accounts/accounts.repository.js';
import type { LedgerEntry, LedgerKind } from './ledger-entry.entity.js';
import {
  addKeySpend,
  addKeySpends,
  entriesByRefs,
  entryByRef,
  insertEntries,
  insertEntry,
  setBalance,
  setBalances,
  visibleEntries,
  type NewLedgerEntry,
} from './ledger.repository.js';

export interface Posting {
  accountId: string;
  kind: LedgerKind;
  /** Signed cents: positive credits the account, negative debits it. */
  amountMinor: number;
  /** Unique cause reference; posting the same reference twice is a no-op. */
  externalRef: string;
  description: string;
  keyId?: string | null;
  rentalId?: string | null;
}

export interface PostResult {
  entry: LedgerEntry;
  /** False when this reference had already been posted (a retry); nothing moved. */
  posted: boolean;
}

/** Ledger kinds that count as a key's spending: rentals' debits and usage, minus their reversals. */
export const KEY_SPEND_KINDS: readonly LedgerKind[] = ['RENTAL_DEBIT', 'USAGE', 'REVERSAL'];

export interface LedgerOptions {
  /** A debit taking an account's credits from at or above this (cents) to under it writes `credits.low`. */
  lowCreditsMinor?: number;
}

/**
 * The only writer of ledger_entries, accounts.balance_minor and api_keys.net_spent_minor (a key's
 * net spend, moved with every posting of one of {@link KEY_SPEND_KINDS} that names the key). A
 * posting that takes a balance under the low-credits threshold writes `credits.low` with it, once
 * per crossing: nothing more is read or written while no balance crosses.
 */
export class LedgerService {
  /** The one low-credits threshold (LOW_CREDITS_MINOR), in cents: the event's and the bot's. */
  readonly lowCreditsMinor: number;

  constructor(
    private readonly ds: DataSource,
    private readonly clock: Clock,
    options: LedgerOptions = {},
  ) {
    this.lowCreditsMinor = options.lowCreditsMinor ?? DEFAULT_LOW_CREDITS_MINOR;
  }

  /** Locks the account row; every money decision about an account starts here. */
  async lockAccount(manager: Sql, accountId: string): Promise<Account> {
    const account = await lockAccount(manager, accountId);
    if (!account) throw new AppError('NOT_FOUND', 'Account not found.');
    return account;
  }

  /**
   * Appends one entry and moves the cached balance in the caller's transaction. Must run inside
   * a transaction; takes the account row lock itself unless the caller passes the row it has
   * just read under that lock (`locked`, updated here as the balance moves).
   */
  async post(manager: Sql, p: Posting, locked?: Pick<Account, 'id' | 'balanceMinor'>): Promise<PostResult> {
    checkPostings(manager, [p]);
    if (locked && locked.id !== p.accountId) throw new Error("the locked account is not the posting's account");
    const account = locked ?? (await this.lockAccount(manager, p.accountId));
    const existing = await entryByRef(manager, p.externalRef);
    if (existing) {
      assertSameTerms(existing, p);
      return { entry: existing, posted: false };
    }
    const balanceAfter = safeBalance(account.balanceMinor + p.amountMinor);
    const entry = await insertEntry(manager, this.entryOf(p, balanceAfter));
    await setBalance(manager, p.accountId, balanceAfter);
    const spent = keySpendOf(p);
    if (spent !== 0) await addKeySpend(manager, p.keyId!, spent);
    const before = account.balanceMinor;
    account.balanceMinor = balanceAfter;
    if (crossesLow(before, balanceAfter, this.lowCreditsMinor)) await this.creditsLow(manager, p.accountId);
    return { entry, posted: true };
  }

  /**
   * Many postings in a few statements (the metering sweep's batch), with the same guarantees as
   * {@link post}: inside the caller's transaction, account rows locked (in id order, so sweeps
   * never deadlock each other), a reference already posted skipped (and refused if its terms
   * differ), every amount and balance a safe integer. Returns the number of entries written.
   */
  async postBatch(manager: EntityManager, postings: readonly Posting[]): Promise<number> {
    if (postings.length === 0) return 0;
    checkPostings(manager, postings);
    const refs = postings.map((p) => p.externalRef);
    if (new Set(refs).size !== refs.length) throw new Error('a ledger batch names the same reference twice');
    const balance = await lockAccountBalances(manager, postings.map((p) => p.accountId));
    const crossed = new Set<string>();
    const existing = await entriesByRefs(manager, refs);
    const entries: NewLedgerEntry[] = [];
    const spentByKey = new Map<string, number>();
    for (const p of postings) {
      const prior = existing.get(p.externalRef);
      if (prior) {
        assertSameTerms(prior, p);
        continue;
      }
      if (!balance.has(p.accountId)) throw new AppError('NOT_FOUND', 'Account not found.');
      const before = balance.get(p.accountId)!;
      const after = safeBalance(before + p.amountMinor);
      balance.set(p.accountId, after);
      if (crossesLow(before, after, this.lowCreditsMinor)) crossed.add(p.accountId);
      const spent = keySpendOf(p);
      if (spent !== 0) spentByKey.set(p.keyId!, safeBalance((spentByKey.get(p.keyId!) ?? 0) + spent));
      entries.push(this.entryOf(p, after));
    }
    if (entries.length === 0) return 0;
    await insertEntries(manager, entries);
    await setBalances(manager, balance);
    await addKeySpends(manager, spentByKey);
    // One event per account that crossed in this batch, carrying the balance the batch left.
    for (const accountId of [...crossed].sort()) await this.creditsLow(manager, accountId);
    return entries.length;
  }

  private creditsLow(manager: Sql, accountId: string): Promise<void> {
    return recordAccountEvent(manager, 'credits.low', accountId, this.clock.now(), { thresholdMinor: this.lowCreditsMinor });
  }

  private entryOf(p: Posting, balanceAfterMinor: number): NewLedgerEntry {
    return {
      accountId: p.accountId,
      keyId: p.keyId ?? null,
      rentalId: p.rentalId ?? null,
      kind: p.kind,
      amountMinor: p.amountMinor,
      balanceAfterMinor,
      externalRef: p.externalRef,
      description: p.description,
      createdAt: this.clock.now(),
    };
  }

  /** Newest first; `beforeId` continues below a previously read entry. */
  async recent(accountId: string, limit = 50, beforeId?: number): Promise<LedgerEntry[]> {
    return visibleEntries(this.ds, { kind: 'OWNER', accountId }, limit, beforeId);
  }
}

/** How much `p` adds to its key's net spend (the `api_keys.net_spent_minor` counter): 0 unless a key's rental money. */
function keySpendOf(p: Posting): number {
  return p.keyId && KEY_SPEND_KINDS.includes(p.kind) ? -p.amountMinor : 0;
}

function checkPostings(manager: Sql, postings: readonly Posting[]): void {
  for (const p of postings) if (!Number.isSafeInteger(p.amountMinor)) throw new Error(`ledger amount ${p.amountMinor} is not a safe integer`);
  // Entry and cached balance must commit or roll back together.
  if (!inOpenTransaction(manager)) throw new Error('LedgerService postings must run inside a transaction');
}

function assertSameTerms(existing: LedgerEntry, p: Posting): void {
  if (existing.accountId !== p.accountId || existing.amountMinor !== p.amountMinor || existing.kind !== p.kind) {
    throw new Error(`ledger reference ${p.externalRef} was already posted with different terms`);
  }
}

function safeBalance(n: number): number {
  if (!Number.isSafeInteger(n)) throw new Error('balance would leave the safe integer range');
  return n;
}
