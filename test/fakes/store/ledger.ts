import type { Account } from '../../../src/modules/accounts/account.entity.js';
import { LedgerEntry, type LedgerKind } from '../../../src/modules/billing/ledger-entry.entity.js';
import type { LedgerRepository, NewLedgerEntry } from '../../../src/modules/billing/ledger.repository.js';
import type { NewEvent, StoredEvent } from '../../../src/modules/events/events.repository.js';
import type { Viewer } from '../../../src/modules/keys/visibility.js';
import { DuplicateEntry, MemoryAccountMoneyRepository } from './accounts.js';
import type { MemoryTables } from './memory-store.js';

/*
 * The ledger aggregate in memory: `ledger_entries` keyed by id with its unique cause reference and
 * its account's foreign key. The cached balances and key spend it moves are the accounts
 * aggregate's (MemoryAccountMoneyRepository), as on MySQL.
 */

/** The refusal of an entry whose account does not exist, with the server's code. */
export class MissingReference extends Error {
  readonly code = 'ER_NO_REFERENCED_ROW_2';
  constructor(what: string) {
    super(`Cannot add or update a child row: ${what} (memory store)`);
  }
}

/** Ids in the order of the BIGINT column. */
const byIdDesc = (a: LedgerEntry, b: LedgerEntry) => (BigInt(b.id) > BigInt(a.id) ? 1 : -1);

export class MemoryLedgerRepository implements LedgerRepository {
  constructor(private readonly tables: MemoryTables) {}

  private get entries() {
    return this.tables.table<LedgerEntry>('ledger_entries');
  }

  private get accounts() {
    return this.tables.table<Account>('accounts');
  }

  /** The cached figures are the accounts aggregate's, as on MySQL. */
  private get money() {
    return new MemoryAccountMoneyRepository(this.tables);
  }

  async entryByRef(externalRef: string): Promise<LedgerEntry | null> {
    return this.entries.first((e) => e.externalRef === externalRef) ?? null;
  }

  async insert(fields: NewLedgerEntry): Promise<LedgerEntry> {
    this.refuse([fields]);
    const entry = Object.assign(new LedgerEntry(), fields, { id: this.entries.nextId() });
    this.entries.insert(entry.id, entry);
    return Object.assign(new LedgerEntry(), entry);
  }

  async insertMany(entries: readonly NewLedgerEntry[]): Promise<void> {
    this.refuse(entries);
    for (const fields of entries) {
      const entry = Object.assign(new LedgerEntry(), fields, { id: this.entries.nextId() });
      this.entries.insert(entry.id, entry);
    }
  }

  /** A statement that breaks a key writes none of its rows. */
  private refuse(entries: readonly NewLedgerEntry[]): void {
    const refs = new Set<string>();
    for (const e of entries) {
      if (refs.has(e.externalRef) || this.entries.first((x) => x.externalRef === e.externalRef))
        throw new DuplicateEntry(`uq_ledger_external_ref ${e.externalRef}`);
      refs.add(e.externalRef);
      if (!this.accounts.has(e.accountId)) throw new MissingReference(`fk_ledger_account ${e.accountId}`);
    }
  }

  async setBalance(accountId: string, balanceMinor: number): Promise<void> {
    return this.money.setBalance(accountId, balanceMinor);
  }

  async setBalances(money: ReadonlyMap<string, { balanceMinor: number; unpostedUsageMinor: number }>): Promise<void> {
    return this.money.setBalances(money);
  }

  async addKeySpend(keyId: string, spentMinor: number): Promise<void> {
    return this.money.addKeySpend(keyId, spentMinor);
  }

  async addKeySpends(spentByKey: ReadonlyMap<string, number>): Promise<void> {
    return this.money.addKeySpends(spentByKey);
  }

  async visible(viewer: Viewer, limit: number, beforeId?: number): Promise<LedgerEntry[]> {
    return this.entries
      .where(
        (e) =>
          e.accountId === viewer.accountId &&
          (viewer.kind === 'OWNER' || e.keyId === viewer.keyId) &&
          (beforeId === undefined || BigInt(e.id) < BigInt(beforeId)),
      )
      .sort(byIdDesc)
      .slice(0, limit);
  }

  async sumOfRental(rentalId: string, kinds: readonly LedgerKind[]): Promise<number> {
    return this.entries
      .where((e) => e.rentalId === rentalId && kinds.includes(e.kind))
      .reduce((sum, e) => sum + e.amountMinor, 0);
  }

  async appendEvent(e: NewEvent): Promise<void> {
    const events = this.tables.table<StoredEvent>('events');
    const id = events.nextId();
    const seq = events.where((x) => x.accountId === e.accountId).length + 1;
    events.insert(id, {
      id,
      seq: String(seq),
      type: e.type,
      accountId: e.accountId,
      keyId: e.keyId,
      rentalId: e.rentalId,
      // Stored as the JSON column holds it: what a reader gets back is the parsed text.
      data: JSON.parse(JSON.stringify(e.data)) as unknown,
      createdAt: e.at,
    });
  }
}

/** The events the ledger wrote in memory, oldest first (the events aggregate's readers are its own). */
export function memoryEvents(tables: MemoryTables): StoredEvent[] {
  return tables.table<StoredEvent>('events').all();
}
