import { Column, Entity, PrimaryColumn } from 'typeorm';
import { minorUnits } from '../../../db/columns.js';
import type { DeploymentBillingModel, RentalStatus, TerminationReason } from '../state/rental-status.js';

/** The machine behind a rental; created with its order in one transaction. */
@Entity({ name: 'deployments' })
export class Deployment {
  @PrimaryColumn({ type: 'char', length: 36 })
  id: string;

  @Column({ name: 'order_id', type: 'char', length: 36 })
  orderId: string;

  @Column({ name: 'account_id', type: 'char', length: 36 })
  accountId: string;

  @Column({ name: 'key_id', type: 'char', length: 36 })
  keyId: string;

  @Column({ type: 'varchar', length: 32 })
  status: RentalStatus;

  /** Copied from the order at admission; never changes afterwards. */
  @Column({ name: 'billing_model', type: 'varchar', length: 32 })
  billingModel: DeploymentBillingModel;

  @Column({ name: 'hours_purchased', type: 'int', nullable: true })
  hoursPurchased: number | null;

  @Column({ name: 'duration_seconds', type: 'int', nullable: true })
  durationSeconds: number | null;

  @Column({ name: 'started_at', type: 'datetime', precision: 3, nullable: true })
  startedAt: Date | null;

  @Column({ name: 'ends_at', type: 'datetime', precision: 3, nullable: true })
  endsAt: Date | null;

  /** Verified destruction time; written once, never changed. */
  @Column({ name: 'ended_at', type: 'datetime', precision: 3, nullable: true })
  endedAt: Date | null;

  /** Provider and cached offer of the current (or last) create attempt. */
  @Column({ name: 'provider_id', type: 'varchar', length: 64, nullable: true })
  providerId: string | null;

  @Column({ name: 'offer_id', type: 'char', length: 36, nullable: true })
  offerId: string | null;

  /** Customer cents per hour of the offer being run; metering multiplies active seconds by it. */
  @Column({ name: 'hourly_price_minor', type: 'bigint', transformer: minorUnits })
  hourlyPriceMinor: number;

  /** Metered rentals: usage at which the rental is terminated (min of budget and key cap). */
  @Column({ name: 'spend_cap_minor', type: 'bigint', nullable: true, transformer: minorUnits })
  spendCapMinor: number | null;

  /** Number of the current create attempt (1-based; 0 before the first). */
  @Column({ type: 'int' })
  attempt: number;

  /** Label of the current attempt's instance, derived from id and attempt; unique. */
  @Column({ type: 'varchar', length: 128, nullable: true })
  label: string | null;

  @Column({ name: 'instance_id', type: 'varchar', length: 191, nullable: true })
  instanceId: string | null;

  @Column({ name: 'ssh_host', type: 'varchar', length: 255, nullable: true })
  sshHost: string | null;

  @Column({ name: 'ssh_port', type: 'int', nullable: true })
  sshPort: number | null;

  @Column({ name: 'ssh_user', type: 'varchar', length: 64, nullable: true })
  sshUser: string | null;

  /**
   * Fingerprint (`SHA256:...`) of the machine's SSH host key, pinned at first contact (or from the
   * provider's answer before it); every later check refuses a server showing another. Null until then.
   */
  @Column({ name: 'ssh_host_key', type: 'varchar', length: 100, nullable: true })
  sshHostKey: string | null;

  @Column({ name: 'ssh_public_key', type: 'text', nullable: true })
  sshPublicKey: string | null;

  /** AES-256-GCM ciphertext of the private key (docs/security.md, Keys and secrets); never logged. */
  @Column({ name: 'ssh_private_key_enc', type: 'varbinary', length: 4096, nullable: true })
  sshPrivateKeyEnc: Buffer | null;

  /** Id of the key-encryption key that sealed the private key, for rotation. */
  @Column({ name: 'ssh_key_kid', type: 'varchar', length: 32, nullable: true })
  sshKeyKid: string | null;

  /** Metering has charged usage up to this instant. */
  @Column({ name: 'metered_until', type: 'datetime', precision: 3, nullable: true })
  meteredUntil: Date | null;

  /** Usage charged so far (metered rentals), in cents: taken from the balance, posted to the ledger or not yet. */
  @Column({ name: 'usage_minor', type: 'bigint', transformer: minorUnits })
  usageMinor: number;

  /** The part of `usageMinor` posted to the ledger (hourly, and at the end), in cents. */
  @Column({ name: 'posted_usage_minor', type: 'bigint', transformer: minorUnits, default: 0 })
  postedUsageMinor: number;

  /** The instant the posted usage runs to; null means the rental's start. */
  @Column({ name: 'posted_until', type: 'datetime', precision: 3, nullable: true })
  postedUntil: Date | null;

  /**
   * The customer's per-GB traffic prices of the offer being run (millionths of a USD, markup
   * included); null: its traffic is free and no counters are read.
   */
  @Column({ name: 'traffic_up_price_micro', type: 'int', nullable: true })
  trafficUpPriceMicro: number | null;

  @Column({ name: 'traffic_down_price_micro', type: 'int', nullable: true })
  trafficDownPriceMicro: number | null;

  /** The highest cumulative traffic counters read from the instance, in bytes. */
  @Column({ name: 'traffic_up_bytes', type: 'bigint', transformer: minorUnits, default: 0 })
  trafficUpBytes: number;

  @Column({ name: 'traffic_down_bytes', type: 'bigint', transformer: minorUnits, default: 0 })
  trafficDownBytes: number;

  /** When the counters were last read; null: never. */
  @Column({ name: 'traffic_read_at', type: 'datetime', precision: 3, nullable: true })
  trafficReadAt: Date | null;

  /** Traffic charged so far, in cents: taken from the balance, posted to the ledger or not yet. */
  @Column({ name: 'traffic_minor', type: 'bigint', transformer: minorUnits, default: 0 })
  trafficMinor: number;

  /** The part of `trafficMinor` posted to the ledger (TRAFFIC entries, hourly and at the end), in cents. */
  @Column({ name: 'posted_traffic_minor', type: 'bigint', transformer: minorUnits, default: 0 })
  postedTrafficMinor: number;

  @Column({ name: 'terminate_requested_at', type: 'datetime', precision: 3, nullable: true })
  terminateRequestedAt: Date | null;

  /** Why termination began (see TERMINATION_REASONS in rental-status.ts). */
  @Column({ name: 'termination_reason', type: 'varchar', length: 32, nullable: true })
  terminationReason: TerminationReason | null;

  @Column({ name: 'verify_attempts', type: 'int' })
  verifyAttempts: number;

  /** Last provider/SSH check, for operators; never contains key material. */
  @Column({ name: 'last_check_detail', type: 'varchar', length: 512, nullable: true })
  lastCheckDetail: string | null;

  /** When status last changed; the reconciler re-drives rows stuck past a bound. */
  @Column({ name: 'status_changed_at', type: 'datetime', precision: 3, nullable: true })
  statusChangedAt: Date | null;

  @Column({ name: 'created_at', type: 'datetime', precision: 3 })
  createdAt: Date;

  @Column({ name: 'updated_at', type: 'datetime', precision: 3 })
  updatedAt: Date;

  /** Where provisioning stands while PROVISIONING (or PENDING, waiting for capacity); see MACHINE_PHASES. */
  @Column({ type: 'varchar', length: 32, nullable: true })
  phase: string | null;

  /** When the deployment entered its phase. */
  @Column({ name: 'phase_since', type: 'datetime', precision: 3, nullable: true })
  phaseSince: Date | null;

  /** The URLs of the exposed ports, once ACTIVE. */
  @Column({ type: 'json', nullable: true })
  endpoints: { port: number; url: string }[] | null;

  /**
   * Before ACTIVE: the first moment a machine running the rental's own settings (startup script,
   * image, environment) let the service's check in with the rental's key. Its time is charged
   * from then even if the check never passes (docs/rentals-and-money.md, Time before ACTIVE).
   */
  @Column({ name: 'usable_at', type: 'datetime', precision: 3, nullable: true })
  usableAt: Date | null;

  /** The lease in force, counted from ACTIVE: the rental's own, else its key's longest rental. */
  @Column({ name: 'lease_seconds', type: 'int', nullable: true })
  leaseSeconds: number | null;
}
