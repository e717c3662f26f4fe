import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A refund owed on a checkout is recorded before the payment provider is asked for it, so a crash
 * or a failed call between the decision and the refund leaves a row the payments job retries.
 */
export class CheckoutRefundState1763800010900 implements MigrationInterface {
  name = 'CheckoutRefundState1763800010900';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE checkouts
      ADD COLUMN refund_status VARCHAR(16) NULL,
      ADD COLUMN refund_requested_at DATETIME(3) NULL,
      ADD COLUMN refund_attempts INT NOT NULL DEFAULT 0,
      ADD KEY ix_checkouts_refund (refund_status, refund_requested_at)`);
    await q.query(
      `UPDATE checkouts SET refund_status = 'SUCCEEDED', refund_requested_at = refunded_at WHERE refund_id IS NOT NULL`,
    );
    // Payments that arrived for card orders that could no longer run (cancelled, or expired before
    // the payment landed) were kept without a refund; they are owed one now.
    await q.query(`UPDATE checkouts c
      JOIN orders o ON o.id = c.order_id
      JOIN deployments d ON d.order_id = o.id
      SET c.refund_status = 'PENDING', c.refund_requested_at = UTC_TIMESTAMP(3)
      WHERE c.purpose = 'ORDER' AND c.status = 'PAID' AND c.refund_id IS NULL AND d.started_at IS NULL
        AND ((o.status = 'FAILED' AND o.failure_code IN ('PAYMENT_EXPIRED', 'PAYMENT_FAILED'))
          OR (o.status = 'TERMINATED' AND d.terminate_requested_at IS NOT NULL AND d.terminate_requested_at < c.paid_at))`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(
      `ALTER TABLE checkouts DROP KEY ix_checkouts_refund, DROP COLUMN refund_status, DROP COLUMN refund_requested_at, DROP COLUMN refund_attempts`,
    );
  }
}
