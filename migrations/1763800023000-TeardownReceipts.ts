import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Teardown receipts (docs/teardown-receipts.md). `receipt_signing_keys`: the Ed25519 pairs that
 * sign them, the public half kept for good, the private half sealed under SECRETS_KEY (with the id
 * of the key that sealed it) until the pair is retired, when it is erased. `active_for_kid` holds
 * the SECRETS_KEY id a pair signs under while it does, unique so processes racing to make the first
 * pair under a key keep one. `teardown_receipts`: one signed receipt per deployment, its body
 * stored exactly as signed.
 */
export class TeardownReceipts1763800023000 implements MigrationInterface {
  name = 'TeardownReceipts1763800023000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE receipt_signing_keys (
      id VARCHAR(64) NOT NULL,
      public_key VARBINARY(32) NOT NULL,
      private_key_sealed VARBINARY(255) NULL,
      private_key_kid VARCHAR(32) NULL,
      active_for_kid VARCHAR(32) NULL,
      created_at DATETIME(3) NOT NULL,
      retired_at DATETIME(3) NULL,
      PRIMARY KEY (id),
      UNIQUE KEY uq_receipt_signing_keys_active (active_for_kid)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);
    await q.query(`CREATE TABLE teardown_receipts (
      deployment_id CHAR(36) NOT NULL,
      rental_id CHAR(36) NOT NULL,
      body TEXT NOT NULL,
      signing_key_id VARCHAR(64) NOT NULL,
      signature VARCHAR(128) NOT NULL,
      issued_at DATETIME(3) NOT NULL,
      PRIMARY KEY (deployment_id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE teardown_receipts`);
    await q.query(`DROP TABLE receipt_signing_keys`);
  }
}
