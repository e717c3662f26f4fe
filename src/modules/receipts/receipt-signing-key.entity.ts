import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * A key pair that signs teardown receipts. The public half is kept for good (it is published, so
 * every receipt it signed keeps verifying); the private half is sealed under SECRETS_KEY while the
 * pair is active and erased when it is retired.
 */
@Entity({ name: 'receipt_signing_keys' })
export class ReceiptSigningKey {
  /** `rk_` and the base32 of the first 10 bytes of the public key's SHA-256 (receipt-keys.ts). */
  @PrimaryColumn({ type: 'varchar', length: 64 })
  id: string;

  /** The raw 32-byte Ed25519 public key. */
  @Column({ name: 'public_key', type: 'varbinary', length: 32 })
  publicKey: Buffer;

  /** The private key (its JWK `d`), sealed by SecretBox bound to the row's id; null once retired. */
  @Column({ name: 'private_key_sealed', type: 'varbinary', length: 255, nullable: true })
  privateKeySealed: Buffer | null;

  /** The id of the SECRETS_KEY that sealed the private half now (re-sealing moves it); null once retired. */
  @Column({ name: 'private_key_kid', type: 'varchar', length: 32, nullable: true })
  privateKeyKid: string | null;

  /**
   * While the pair signs: the id of the SECRETS_KEY that was current when it was made (unique, so
   * processes racing to make the first pair under a key keep one). Null once retired.
   */
  @Column({ name: 'active_for_kid', type: 'varchar', length: 32, nullable: true })
  activeForKid: string | null;

  @Column({ name: 'created_at', type: 'datetime', precision: 3 })
  createdAt: Date;

  @Column({ name: 'retired_at', type: 'datetime', precision: 3, nullable: true })
  retiredAt: Date | null;
}
