import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `accounts.lock_version`: a counter that every account lock guarding a decision without moving
 * the balance (admission, issuing or approving with a key, revoking an owner key) increments in
 * the same transaction. On a multi-primary Galera cluster a `SELECT … FOR UPDATE` lock holds only
 * on its own node, and certification sees a conflict only between transactions that write the same
 * row; writing the account row makes two such decisions taken on two nodes conflict, so the later
 * one is rolled back and run again by the retry helper instead of both committing. Nothing reads
 * the value.
 */
export class AccountLockVersion1763800018200 implements MigrationInterface {
  name = 'AccountLockVersion1763800018200';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE accounts ADD COLUMN lock_version BIGINT NOT NULL DEFAULT 0`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE accounts DROP COLUMN lock_version`);
  }
}
