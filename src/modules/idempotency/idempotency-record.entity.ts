import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';

/** One use of an Idempotency-Key within a scope (an endpoint, and the account where there is one). */
@Entity({ name: 'idempotency_records' })
export class IdempotencyRecord {
  @PrimaryGeneratedColumn({ type: 'bigint' })
  id: string;

  @Column({ type: 'varchar', length: 80 })
  scope: string;

  @Column({ name: 'idem_key', type: 'varchar', length: 128 })
  idemKey: string;

  /** SHA-256 of the canonical request body: a changed body is a conflict. */
  @Column({ name: 'request_hash', type: 'char', length: 64 })
  requestHash: string;

  /** What the first request created (account, top-up, rental, key id). */
  @Column({ name: 'resource_id', type: 'varchar', length: 64, nullable: true })
  resourceId: string | null;

  @Column({ name: 'created_at', type: 'datetime', precision: 3 })
  createdAt: Date;
}
