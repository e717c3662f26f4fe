import { randomBytes, randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { createStore } from '../../src/repositories.js';
import { webhooksContract, type WebhookKeySeed } from '../contracts/webhooks.contract.js';
import { testDataSource } from '../helpers/db.js';

/** Keys written with SQL as the accounts aggregate would: an agent key of the account, made with it. */
function mariaDbKeys(ds: DataSource): WebhookKeySeed {
  return {
    async key(accountId) {
      const at = new Date();
      const id = randomUUID();
      await ds.query(`INSERT IGNORE INTO accounts (id, billing_model, balance_minor, created_at) VALUES (?, ?, 0, ?)`, [
        accountId,
        'ACCOUNT_BALANCE',
        at,
      ]);
      await ds.query(
        `INSERT INTO api_keys (id, account_id, kind, name, prefix, secret_hash, scopes, max_per_rental_minor, budget_limit_minor, max_concurrent_deployments, origin, created_at, active_deployments)
         VALUES (?, ?, 'AGENT', 'contract', ?, ?, 'read', 0, 0, 1, 'seed', ?, 0)`,
        [id, accountId, randomBytes(4).toString('hex'), randomBytes(32), at],
      );
      return id;
    },
    async revoke(keyId, at) {
      await ds.query(`UPDATE api_keys SET revoked_at = ? WHERE id = ?`, [at, keyId]);
    },
  };
}

webhooksContract('MariaDB', async () => {
  const ds = await testDataSource();
  return { store: createStore(ds), keys: mariaDbKeys(ds) };
});
