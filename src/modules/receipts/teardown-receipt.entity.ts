import { Column, Entity, PrimaryColumn } from 'typeorm';

/** The signed teardown receipt of one deployment, written once, in the transaction that made it TERMINATED. */
@Entity({ name: 'teardown_receipts' })
export class TeardownReceipt {
  @PrimaryColumn({ name: 'deployment_id', type: 'char', length: 36 })
  deploymentId: string;

  @Column({ name: 'rental_id', type: 'char', length: 36 })
  rentalId: string;

  /** The receipt exactly as signed: its canonical JSON (vocabulary/receipts.ts). */
  @Column({ type: 'text' })
  body: string;

  @Column({ name: 'signing_key_id', type: 'varchar', length: 64 })
  signingKeyId: string;

  /** The Ed25519 signature of `body`'s UTF-8 bytes, unpadded base64url. */
  @Column({ type: 'varchar', length: 128 })
  signature: string;

  @Column({ name: 'issued_at', type: 'datetime', precision: 3 })
  issuedAt: Date;
}
