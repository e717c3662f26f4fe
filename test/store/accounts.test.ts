import type { DataSource } from 'typeorm';
import { createStore } from '../../src/repositories.js';
import { accountsContract, type AccountsFixture } from '../contracts/accounts.contract.js';
import { testDataSource } from '../helpers/db.js';

/**
 * The money columns other aggregates move, written with SQL as their repositories would, and set
 * back to zero after each test: the root hooks check every account and key against the ledger.
 */
function mariaDbFixture(ds: DataSource): AccountsFixture {
  const accounts = new Set<string>();
  const keys = new Set<string>();
  return {
    store: createStore(ds),
    async setMoney(accountId, balanceMinor, unpostedUsageMinor) {
      accounts.add(accountId);
      await ds.query(`UPDATE accounts SET balance_minor = ?, unposted_usage_minor = ? WHERE id = ?`, [
        balanceMinor,
        unpostedUsageMinor,
        accountId,
      ]);
    },
    async setKeyCounters(keyId, c) {
      keys.add(keyId);
      await ds.query(`UPDATE api_keys SET net_spent_minor = ?, active_deployments = ? WHERE id = ?`, [
        c.netSpentMinor,
        c.activeDeployments,
        keyId,
      ]);
    },
    async reset() {
      if (accounts.size)
        await ds.query(`UPDATE accounts SET balance_minor = 0, unposted_usage_minor = 0 WHERE id IN (?)`, [
          [...accounts],
        ]);
      if (keys.size)
        await ds.query(`UPDATE api_keys SET net_spent_minor = 0, active_deployments = 0 WHERE id IN (?)`, [[...keys]]);
      accounts.clear();
      keys.clear();
    },
  };
}

accountsContract('MariaDB', async () => mariaDbFixture(await testDataSource()));
