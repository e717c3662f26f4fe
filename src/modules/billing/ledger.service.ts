import type { Clock } from '../../clock.js';
import type { Store } from '../../db/store.js';
import { AppError } from '../../errors/app-error.js';
import { countCredits } from '../../metrics/outcomes.js';
import type { Account } from '../accounts/account.entity.js';
import type { AccountMoney, AccountsRepository } from '../accounts/accounts.repository.js';
import { crossesLow, DEFAULT_LOW_CREDITS_MINOR, recordAccountEvent } from './account-events.js';
import type { LedgerEntry, LedgerKind } from './ledger-entry.entity.js';
import type { LedgerRepository, NewLedgerEntry } from './ledger.repository.js';

/**
 * The repositories of the transaction a posting joins: the ledger's, and the accounts' for the
 * account locks every money decision starts with.
 */
export interface LedgerRepos {
  ledger: LedgerRepository;
  accounts: Pick<AccountsRepository, 'lockAccount' | 'lockAccountBalances'>;
}

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

/** Metered usage charged to one rental: taken from the balance now, posted to the ledger later. */
export interface UsageAccrual {
  accountId: string;
  /** The key that started the rental: its net spend grows by the usage at once. */
  keyId: string | null;
  /** Cents, zero or more. */
  amountMinor: number;
}

/**
 * THE relation between an account's two figures: what the ledger holds (the sum of its entries,
 * each entry's `balance_after_minor`) is the balance the customer has plus the usage taken from it
 * that no entry holds yet. Every reader of credits reads `balance_minor`, exact to the sweep.
 */
export function postedBalanceMinor(m: { balanceMinor: number; unpostedUsageMinor: number }): number {
  return safeBalance(m.balanceMinor + m.unpostedUsageMinor);
}

export interface PostResult {
  entry: LedgerEntry;
  /** False when this reference had already been posted (a retry); nothing moved. */
  posted: boolean;
}

/** Ledger kinds that count as a key's spending: rentals' debits and usage, minus their reversals. */
export const KEY_SPEND_KINDS: readonly LedgerKind[] = ['RENTAL_DEBIT', 'USAGE', 'TRAFFIC', 'REVERSAL'];

/** Kinds of accrued money a posting moves out of the unposted counter into the ledger (`accrueUsage`). */
export const ACCRUED_KINDS: readonly LedgerKind[] = ['USAGE', 'TRAFFIC'];

/**
 * What a rental has cost its account so far, in cents: the net of its entries that count as its
 * key's spending ({@link KEY_SPEND_KINDS}), as the ledger holds them in `ledger`'s view (a
 * transaction sees its own postings).
 */
export async function rentalSpentMinor(
  ledger: Pick<LedgerRepository, 'sumOfRental'>,
  rentalId: string,
): Promise<number> {
  return 0 - (await ledger.sumOfRental(rentalId, KEY_SPEND_KINDS));
}

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
    private readonly store: Store<{ ledger: LedgerRepository }>,
    private readonly clock: Clock,
    options: LedgerOptions = {},
  ) {
    this.lowCreditsMinor = options.lowCreditsMinor ?? DEFAULT_LOW_CREDITS_MINOR;
  }

  /** Locks the account row; every money decision about an account starts here. In a transaction only. */
  async lockAccount(repos: Pick<LedgerRepos, 'accounts'>, accountId: string): Promise<Account> {
    const account = await repos.accounts.lockAccount(accountId);
    if (!account) throw new AppError('NOT_FOUND', 'Account not found.');
    return account;
  }

  /**
   * Appends one entry and moves the cached balance in the caller's transaction (`repos` are its
   * repositories). Must run inside a transaction; takes the account row lock itself unless the
   * caller passes the row it has just read under that lock (`locked`, updated here as the balance
   * moves). With `locked`, its first statement is issued before it awaits anything.
   */
  async post(
    repos: LedgerRepos,
    p: Posting,
    locked?: Pick<Account, 'id' | 'balanceMinor'> & Partial<Pick<Account, 'unpostedUsageMinor'>>,
  ): Promise<PostResult> {
    checkPostings([p]);
    if (locked && locked.id !== p.accountId) throw new Error("the locked account is not the posting's account");
    const account = locked ?? (await this.lockAccount(repos, p.accountId));
    const { ledger } = repos;
    const existing = await ledger.entryByRef(p.externalRef);
    if (existing) {
      assertSameTerms(existing, p);
      return { entry: existing, posted: false };
    }
    const balanceAfter = safeBalance(account.balanceMinor + p.amountMinor);
    const entry = await ledger.insert(
      this.entryOf(
        p,
        postedBalanceMinor({ balanceMinor: balanceAfter, unpostedUsageMinor: account.unpostedUsageMinor ?? 0 }),
      ),
    );
    await ledger.setBalance(p.accountId, balanceAfter);
    countCredits(p.kind, p.amountMinor);
    const spent = keySpendOf(p);
    if (spent !== 0) await ledger.addKeySpend(p.keyId!, spent);
    const before = account.balanceMinor;
    account.balanceMinor = balanceAfter;
    if (crossesLow(before, balanceAfter, this.lowCreditsMinor)) await this.creditsLow(repos, p.accountId);
    return { entry, posted: true };
  }

  /**
   * Charges metered usage in a few statements, in the caller's transaction, with the account rows
   * locked in id order (so sweeps never deadlock each other). Each accrual is taken from its
   * account's balance and added to its key's net spend and to the account's unposted usage at
   * once, so balances and limits are exact at every sweep; each posting (a USAGE entry of usage
   * accrued already, this call's included) moves usage out of the unposted counter into the
   * ledger and leaves the balance as it is. The ledger's unique reference is the guard against a
   * repeated posting: the insert fails and the caller's transaction rolls back. A balance that
   * falls under the low-credits threshold writes `credits.low`, once per account and call, with
   * the balance the call left. Returns the number of entries written.
   *
   * A caller that has locked the accounts already (`lockAccountBalances`, in this transaction)
   * passes what it read as `locked`: the call then issues its writes before awaiting anything, so
   * they travel with whatever the caller issued in the same tick. `locked` is updated as the
   * balances move.
   */
  async accrueUsage(
    repos: LedgerRepos,
    accruals: readonly UsageAccrual[],
    postings: readonly Posting[],
    locked?: Map<string, AccountMoney>,
  ): Promise<number> {
    if (accruals.length === 0 && postings.length === 0) return 0;
    checkPostings([...accruals.map((a) => ({ amountMinor: a.amountMinor })), ...postings]);
    const money =
      locked ?? (await repos.accounts.lockAccountBalances([...accruals, ...postings].map((x) => x.accountId)));
    const before = new Map([...money].map(([id, m]) => [id, m.balanceMinor]));
    const of = (accountId: string) => {
      const m = money.get(accountId);
      if (!m) throw new AppError('NOT_FOUND', 'Account not found.');
      return m;
    };
    const spentByKey = new Map<string, number>();
    for (const a of accruals) {
      if (a.amountMinor < 0) throw new Error('usage accrues as a positive amount');
      const m = of(a.accountId);
      m.balanceMinor = safeBalance(m.balanceMinor - a.amountMinor);
      m.unpostedUsageMinor = safeBalance(m.unpostedUsageMinor + a.amountMinor);
      if (a.keyId) spentByKey.set(a.keyId, safeBalance((spentByKey.get(a.keyId) ?? 0) + a.amountMinor));
    }
    const entries: NewLedgerEntry[] = [];
    for (const p of postings) {
      if (!ACCRUED_KINDS.includes(p.kind) || p.amountMinor > 0)
        throw new Error('only accrued usage (a USAGE or TRAFFIC debit) posts from the unposted counter');
      const m = of(p.accountId);
      m.unpostedUsageMinor += p.amountMinor;
      if (m.unpostedUsageMinor < 0) throw new Error(`account ${p.accountId} would post more usage than it has accrued`);
      entries.push(this.entryOf(p, postedBalanceMinor(m)));
    }
    const { ledger } = repos;
    await Promise.all([ledger.setBalances(money), ledger.addKeySpends(spentByKey), ledger.insertMany(entries)]);
    for (const e of entries) countCredits(e.kind, e.amountMinor);
    for (const [id, m] of [...money].sort(([a], [b]) => (a < b ? -1 : 1))) {
      if (crossesLow(before.get(id)!, m.balanceMinor, this.lowCreditsMinor)) await this.creditsLow(repos, id);
    }
    return entries.length;
  }

  private creditsLow(repos: LedgerRepos, accountId: string): Promise<void> {
    return recordAccountEvent(repos, 'credits.low', accountId, this.clock.now(), {
      thresholdMinor: this.lowCreditsMinor,
    });
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
    return this.store.read((r) => r.ledger.visible({ kind: 'OWNER', accountId }, limit, beforeId));
  }
}

/** How much `p` adds to its key's net spend (the `api_keys.net_spent_minor` counter): 0 unless a key's rental money. */
function keySpendOf(p: Posting): number {
  return p.keyId && KEY_SPEND_KINDS.includes(p.kind) ? -p.amountMinor : 0;
}

// Entry and cached balance must commit or roll back together: the MySQL repository's writes refuse
// to run outside a transaction.
function checkPostings(postings: readonly Pick<Posting, 'amountMinor'>[]): void {
  for (const p of postings)
    if (!Number.isSafeInteger(p.amountMinor)) throw new Error(`ledger amount ${p.amountMinor} is not a safe integer`);
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
