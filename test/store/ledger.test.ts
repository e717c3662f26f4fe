import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { MysqlLedgerRepository } from '../../src/modules/billing/ledger.repository.js';
import { createStore } from '../../src/repositories.js';
import { ledgerContract, type LedgerFixture } from '../contracts/ledger.contract.js';
import { testDataSource } from '../helpers/db.js';

/** The contract's rows, taken back to nothing after each test: the root hooks check every account and key against the ledger. */
function mariaDbFixture(ds: DataSource): LedgerFixture {
  return {
    store: createStore(ds),
    async eventsOf(accountId) {
      const rows: { type: string; account_id: string; key_id: string | null; data: string | object }[] = await ds.query(
        `SELECT type, account_id, key_id, data FROM events WHERE account_id = ? ORDER BY id`,
        [accountId],
      );
      return rows.map((r) => ({
        type: r.type,
        accountId: r.account_id,
        keyId: r.key_id,
        data: typeof r.data === 'string' ? JSON.parse(r.data) : r.data,
      }));
    },
    async reset(accountIds, keyIds) {
      if (accountIds.length) {
        await ds.query(`DELETE FROM ledger_entries WHERE account_id IN (?)`, [accountIds]);
        await ds.query(`UPDATE accounts SET balance_minor = 0, unposted_usage_minor = 0 WHERE id IN (?)`, [accountIds]);
      }
      if (keyIds.length) await ds.query(`UPDATE api_keys SET net_spent_minor = 0 WHERE id IN (?)`, [keyIds]);
    },
  };
}

ledgerContract('MariaDB', async () => mariaDbFixture(await testDataSource()));

describe('ledger repository (MariaDB only)', () => {
  it('writes nothing outside a transaction: an entry would commit apart from the balance it moves', async () => {
    const ds = await testDataSource();
    const outside = new MysqlLedgerRepository(ds);
    const ref = `contract:${randomUUID()}`;
    await assert.rejects(
      outside.insert({
        accountId: randomUUID(),
        keyId: null,
        rentalId: null,
        kind: 'TOPUP',
        amountMinor: 1,
        balanceAfterMinor: 1,
        externalRef: ref,
        description: 'outside',
        createdAt: new Date(),
      }),
      /only inside a transaction/,
    );
    await assert.rejects(outside.setBalance(randomUUID(), 1), /only inside a transaction/);
    assert.equal(await outside.entryByRef(ref), null);
  });
});
