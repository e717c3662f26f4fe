import { In, LessThan, type DataSource, type EntityManager } from 'typeorm';
import type { Clock } from '../../clock.js';
import { readMinor } from '../../db/columns.js';
import { derivedTable } from '../../db/derived-table.js';
import { hydrate, insertEntity } from '../../db/entity-rows.js';
import { inOpenTransaction, type Sql } from '../../db/sql.js';
import { AppError } from '../../errors/app-error.js';
import { Account } from '../accounts/account.entity.js';
import { LedgerEntry, type LedgerKind } from './ledger-entry.entity.js';

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

/**
 * The only writer of ledger_entries, accounts.balance_minor and api_keys.net_spent_minor (a key's
 * net spend, moved with every posting of one of {@link KEY_SPEND_KINDS} that names the key).
 */
export class LedgerService {
  constructor(
    private readonly ds: DataSource,
    private readonly clock: Clock,
  ) {}

  /** Locks the account row; every money decision about an account starts here. */
  async lockAccount(manager: Sql, accountId: string): Promise<Account> {
    const rows: Record<string, unknown>[] = await manager.query(`SELECT * FROM accounts WHERE id = ? FOR UPDATE`, [accountId]);
    if (rows.length !== 1) throw new AppError('NOT_FOUND', 'Account not found.');
    return hydrate(manager, Account, rows[0]);
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
    const found: Record<string, unknown>[] = await manager.query(`SELECT * FROM ledger_entries WHERE external_ref = ?`, [p.externalRef]);
    if (found.length > 0) {
      const existing = hydrate(manager, LedgerEntry, found[0]);
      assertSameTerms(existing, p);
      return { entry: existing, posted: false };
    }
    const balanceAfter = safeBalance(account.balanceMinor + p.amountMinor);
    const fields = this.entryOf(p, balanceAfter);
    const { insertId } = await insertEntity(manager, LedgerEntry, fields);
    const entry = Object.assign(new LedgerEntry(), fields, { id: String(insertId) });
    await manager.query(`UPDATE accounts SET balance_minor = ? WHERE id = ?`, [balanceAfter, p.accountId]);
    const spent = keySpendOf(p);
    if (spent !== 0) await manager.query(`UPDATE api_keys SET net_spent_minor = net_spent_minor + ? WHERE id = ?`, [spent, p.keyId]);
    account.balanceMinor = balanceAfter;
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
    const accountIds = [...new Set(postings.map((p) => p.accountId))].sort();
    const rows: { id: string; balance_minor: string | number }[] = await manager.query(
      `SELECT id, balance_minor FROM accounts WHERE id IN (?) ORDER BY id FOR UPDATE`,
      [accountIds],
    );
    const balance = new Map(rows.map((r) => [r.id, readMinor(r.balance_minor)]));
    const existing = new Map((await manager.getRepository(LedgerEntry).findBy({ externalRef: In(refs) })).map((e) => [e.externalRef, e]));
    const values: unknown[][] = [];
    const spentByKey = new Map<string, number>();
    for (const p of postings) {
      const prior = existing.get(p.externalRef);
      if (prior) {
        assertSameTerms(prior, p);
        continue;
      }
      if (!balance.has(p.accountId)) throw new AppError('NOT_FOUND', 'Account not found.');
      const after = safeBalance(balance.get(p.accountId)! + p.amountMinor);
      balance.set(p.accountId, after);
      const spent = keySpendOf(p);
      if (spent !== 0) spentByKey.set(p.keyId!, safeBalance((spentByKey.get(p.keyId!) ?? 0) + spent));
      const e = this.entryOf(p, after);
      values.push([e.accountId, e.keyId, e.rentalId, e.kind, e.amountMinor, e.balanceAfterMinor, e.externalRef, e.description, e.createdAt]);
    }
    if (values.length === 0) return 0;
    await manager.query(
      `INSERT INTO ledger_entries (account_id, key_id, rental_id, kind, amount_minor, balance_after_minor, external_ref, description, created_at) VALUES ?`,
      [values],
    );
    const balances = derivedTable(['id', 'v'], [...balance.entries()]);
    await manager.query(`UPDATE accounts a JOIN (${balances.sql}) v ON v.id = a.id SET a.balance_minor = v.v`, balances.params);
    if (spentByKey.size > 0) {
      const spent = derivedTable(['id', 'v'], [...spentByKey.entries()]);
      await manager.query(`UPDATE api_keys k JOIN (${spent.sql}) v ON v.id = k.id SET k.net_spent_minor = k.net_spent_minor + v.v`, spent.params);
    }
    return values.length;
  }

  private entryOf(p: Posting, balanceAfterMinor: number): Omit<LedgerEntry, 'id'> {
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
    const where = beforeId === undefined ? { accountId } : { accountId, id: LessThan(String(beforeId)) };
    return this.ds.getRepository(LedgerEntry).find({ where, order: { id: 'DESC' }, take: limit });
  }

  /** Cached balances of the given accounts. */
  async balances(accountIds: readonly string[]): Promise<Map<string, number>> {
    if (accountIds.length === 0) return new Map();
    const rows: { id: string; balance_minor: string | number }[] = await this.ds.query(`SELECT id, balance_minor FROM accounts WHERE id IN (?)`, [accountIds]);
    return new Map(rows.map((r) => [r.id, readMinor(r.balance_minor)]));
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
