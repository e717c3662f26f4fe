import { randomBytes } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { createStore } from '../../src/repositories.js';
import { credentialsContract, type CredentialsSeed } from '../contracts/credentials.contract.js';
import { testDataSource } from '../helpers/db.js';

/**
 * The rows of other aggregates, written with SQL as their own repositories would: a rental's
 * account and key (once each), its order and its deployment, finished and charged nothing, so the
 * ledger's invariants and the lifecycle's sweeps pass them by; endpoints deleted, so nothing
 * delivers to them.
 */
function mariaDbSeed(ds: DataSource): CredentialsSeed {
  return {
    async rental(r) {
      const at = new Date();
      await ds.query(`INSERT IGNORE INTO accounts (id, billing_model, balance_minor, created_at) VALUES (?, ?, 0, ?)`, [
        r.accountId,
        'ACCOUNT_BALANCE',
        at,
      ]);
      await ds.query(
        `INSERT IGNORE INTO api_keys (id, account_id, kind, name, prefix, secret_hash, scopes, max_per_rental_minor, budget_limit_minor, max_concurrent_deployments, origin, created_at, active_deployments)
         VALUES (?, ?, 'AGENT', 'contract', ?, ?, 'rent,read', 0, 0, 1, 'seed', ?, 0)`,
        [r.keyId, r.accountId, randomBytes(4).toString('hex'), randomBytes(32), at],
      );
      await ds.query(
        `INSERT INTO orders (id, account_id, key_id, funding, billing_model, status, request_kind, hourly_price_minor, total_minor, currency, machine_secrets_enc, machine_secrets_kid, created_at, updated_at)
         VALUES (?, ?, ?, 'CREDITS', 'ACCOUNT_BALANCE', ?, 'OFFER', 100, 0, 'USD', ?, ?, ?, ?)`,
        [
          r.orderId,
          r.accountId,
          r.keyId,
          r.status,
          r.machineSecrets?.sealed ?? null,
          r.machineSecrets?.keyId ?? null,
          at,
          at,
        ],
      );
      await ds.query(
        `INSERT INTO deployments (id, order_id, account_id, key_id, status, billing_model, provider_id, hourly_price_minor, usage_minor, ssh_private_key_enc, ssh_key_kid, status_changed_at, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, 'ACCOUNT_BALANCE', 'local', 100, 0, ?, ?, ?, ?, ?)`,
        [
          r.deploymentId,
          r.orderId,
          r.accountId,
          r.keyId,
          r.status,
          r.sshKey?.sealed ?? null,
          r.sshKey?.keyId ?? null,
          at,
          at,
          at,
        ],
      );
    },
    async webhookEndpoint(e) {
      const at = new Date();
      await ds.query(
        `INSERT INTO webhook_endpoints (id, account_id, key_id, url, event_types, secret_sealed, secret_key_id, after_event_id, created_at, deleted_at)
         VALUES (?, ?, NULL, 'http://127.0.0.1:9/contract', 'rental.active', ?, ?, 0, ?, ?)`,
        [e.id, e.accountId, e.sealed, e.keyId, at, at],
      );
    },
    async receiptSigningKey(id, value) {
      await ds.query(
        `INSERT INTO receipt_signing_keys (id, public_key, private_key_sealed, private_key_kid, active_for_kid, created_at)
         VALUES (?, ?, ?, ?, NULL, ?)`,
        [id, Buffer.alloc(32), value.sealed, value.keyId, new Date()],
      );
    },
  };
}

credentialsContract('MariaDB', async () => {
  const ds = await testDataSource();
  return { store: createStore(ds), seed: mariaDbSeed(ds) };
});
