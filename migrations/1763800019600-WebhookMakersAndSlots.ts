import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Webhook endpoints record the key that made them (`maker_key_id`), and stop when it is revoked.
 * Existing rows: an agent key's endpoint was made by that key; an owner key's by the key whose
 * Idempotency-Key record names it as the resource it created (every create claims one, scope
 * `webhook-endpoints:<key id>`, and records are kept). A row no record names stays null and
 * keeps receiving: no key's revocation can be said to reach it.
 *
 * Deliveries carry their endpoint's account, and `webhook_delivery_slots` holds each account's
 * tries in flight (one row per slot, made on first use), so one account's receivers cannot hold
 * every worker's delivery slots. The due index leads with the account for the per-account reads.
 */
export class WebhookMakersAndSlots1763800019600 implements MigrationInterface {
  name = 'WebhookMakersAndSlots1763800019600';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE webhook_endpoints
      ADD COLUMN maker_key_id CHAR(36) NULL AFTER key_id,
      ADD KEY ix_webhook_endpoints_maker (maker_key_id, deleted_at)`);
    await q.query(`UPDATE webhook_endpoints SET maker_key_id = key_id WHERE key_id IS NOT NULL`);
    await q.query(`UPDATE webhook_endpoints e
      JOIN idempotency_records r ON r.resource_id = e.id AND r.scope LIKE 'webhook-endpoints:%'
      JOIN api_keys k ON k.id = SUBSTRING(r.scope, 19) AND k.account_id = e.account_id
      SET e.maker_key_id = k.id
      WHERE e.maker_key_id IS NULL`);
    await q.query(`ALTER TABLE webhook_deliveries ADD COLUMN account_id CHAR(36) NULL AFTER endpoint_id`);
    await q.query(
      `UPDATE webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id SET d.account_id = e.account_id`,
    );
    // Endpoint rows are never removed, so none should be left; one that is could never be sent.
    await q.query(
      `DELETE a FROM webhook_delivery_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.account_id IS NULL`,
    );
    await q.query(`DELETE FROM webhook_deliveries WHERE account_id IS NULL`);
    await q.query(`ALTER TABLE webhook_deliveries
      MODIFY account_id CHAR(36) NOT NULL,
      DROP KEY ix_webhook_deliveries_due,
      ADD KEY ix_webhook_deliveries_due (status, account_id, next_attempt_at)`);
    await q.query(`CREATE TABLE webhook_delivery_slots (
      account_id CHAR(36) NOT NULL,
      slot TINYINT UNSIGNED NOT NULL,
      delivery_id CHAR(36) NULL,
      held_until DATETIME(3) NULL,
      PRIMARY KEY (account_id, slot)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE webhook_delivery_slots`);
    await q.query(`ALTER TABLE webhook_deliveries
      DROP KEY ix_webhook_deliveries_due,
      ADD KEY ix_webhook_deliveries_due (status, next_attempt_at),
      DROP COLUMN account_id`);
    await q.query(`ALTER TABLE webhook_endpoints DROP KEY ix_webhook_endpoints_maker, DROP COLUMN maker_key_id`);
  }
}
