import { LessThan, type DataSource, type EntityManager } from 'typeorm';
import type { Clock } from '../../clock.js';
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

/** The only writer of ledger_entries and accounts.balance_minor. */
export class LedgerService {
  constructor(
    private readonly ds: DataSource,
    private readonly clock: Clock,
  ) {}

  /** Locks the account row; every money decision about an account starts here. */
  async lockAccount(manager: EntityManager, accountId: string): Promise<Account> {
    const account = await manager
      .getRepository(Account)
      .createQueryBuilder('a')
      .setLock('pessimistic_write')
      .where('a.id = :id', { id: accountId })
      .getOne();
    if (!account) throw new AppError('NOT_FOUND', 'Account not found.');
    return account;
  }

  /**
   * Appends one entry and moves the cached balance in the caller's transaction. Must run inside
   * a transaction; takes the account row lock itself if the caller has not.
   */
  async post(manager: EntityManager, p: Posting): Promise<PostResult> {
    if (!Number.isSafeInteger(p.amountMinor)) throw new Error(`ledger amount ${p.amountMinor} is not a safe integer`);
    // Entry and cached balance must commit or roll back together.
    if (!manager.queryRunner?.isTransactionActive) throw new Error('LedgerService.post must run inside a transaction');
    const account = await this.lockAccount(manager, p.accountId);
    const existing = await manager.getRepository(LedgerEntry).findOneBy({ externalRef: p.externalRef });
    if (existing) {
      if (existing.accountId !== p.accountId || existing.amountMinor !== p.amountMinor || existing.kind !== p.kind) {
        throw new Error(`ledger reference ${p.externalRef} was already posted with different terms`);
      }
      return { entry: existing, posted: false };
    }
    const balanceAfter = account.balanceMinor + p.amountMinor;
    if (!Number.isSafeInteger(balanceAfter)) throw new Error('balance would leave the safe integer range');
    const entry = manager.create(LedgerEntry, {
      accountId: p.accountId,
      keyId: p.keyId ?? null,
      rentalId: p.rentalId ?? null,
      kind: p.kind,
      amountMinor: p.amountMinor,
      balanceAfterMinor: balanceAfter,
      externalRef: p.externalRef,
      description: p.description,
      createdAt: this.clock.now(),
    });
    await manager.insert(LedgerEntry, entry);
    await manager.update(Account, { id: p.accountId }, { balanceMinor: balanceAfter });
    account.balanceMinor = balanceAfter;
    return { entry, posted: true };
  }

  /** Newest first; `beforeId` continues below a previously read entry. */
  async recent(accountId: string, limit = 50, beforeId?: number): Promise<LedgerEntry[]> {
    const where = beforeId === undefined ? { accountId } : { accountId, id: LessThan(String(beforeId)) };
    return this.ds.getRepository(LedgerEntry).find({ where, order: { id: 'DESC' }, take: limit });
  }
}
