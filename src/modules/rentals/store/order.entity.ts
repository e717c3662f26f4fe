import { Column, Entity, PrimaryColumn } from 'typeorm';
import { minorUnits } from '../../../db/columns.js';
import type { GpuMatch } from '../../inventory/gpu-match.js';

import type { DeploymentBillingModel, FailureCode, RentalStatus, ReversalStatus } from '../state/rental-status.js';

/** A rental as the customer bought it. The rental id is this order's id. */
@Entity({ name: 'orders' })
export class Order {
  @PrimaryColumn({ type: 'char', length: 36 })
  id: string;

  @Column({ name: 'account_id', type: 'char', length: 36 })
  accountId: string;

  @Column({ name: 'key_id', type: 'char', length: 36 })
  keyId: string;

  /** CREDITS for API rentals, CARD for the human checkout path. */
  @Column({ type: 'varchar', length: 8 })
  funding: 'CREDITS' | 'CARD';

  @Column({ name: 'billing_model', type: 'varchar', length: 32 })
  billingModel: DeploymentBillingModel;

  @Column({ type: 'varchar', length: 32 })
  status: RentalStatus;

  /** OFFER (explicit offer id) or INTENT (GPU model, count and price ceiling). */
  @Column({ name: 'request_kind', type: 'varchar', length: 8 })
  requestKind: 'OFFER' | 'INTENT';

  @Column({ name: 'offer_id', type: 'char', length: 36, nullable: true })
  offerId: string | null;

  @Column({ name: 'gpu_model', type: 'varchar', length: 100, nullable: true })
  gpuModel: string | null;

  @Column({ name: 'gpu_slug', type: 'varchar', length: 100, nullable: true })
  gpuSlug: string | null;

  /**
   * GPU intent: what `gpuModel` matched in the catalog at admission (its `key` is `gpuSlug`), so
   * provisioning looks for offers without parsing the name again. Null for an explicit offer and
   * for intents admitted before it was kept (see `orderGpuMatch`).
   */
  @Column({ name: 'gpu_match', type: 'json', nullable: true })
  gpuMatch: GpuMatch | null;

  @Column({ name: 'gpu_count', type: 'int', nullable: true })
  gpuCount: number | null;

  @Column({ name: 'max_hourly_price_minor', type: 'bigint', nullable: true, transformer: minorUnits })
  maxHourlyPriceMinor: number | null;

  /**
   * GPU intent: the rental's `matchNote`, decided at admission from the offers then on sale, so
   * every read of the rental says the same. Null for an explicit offer (its note never varies) and
   * for intents admitted before notes were kept (reads then suggest no model).
   */
  @Column({ name: 'match_note', type: 'varchar', length: 2000, nullable: true })
  matchNote: string | null;

  /**
   * Cached offer ids chosen at admission, cheapest first (one for an explicit offer, at most three
   * for a GPU intent). Provisioning tries exactly these, in order; null on card orders written before
   * card checkout shared admission's rows (use offerId).
   */
  @Column({ name: 'candidate_offer_ids', type: 'json', nullable: true })
  candidateOfferIds: string[] | null;

  @Column({ name: 'budget_minor', type: 'bigint', nullable: true, transformer: minorUnits })
  budgetMinor: number | null;

  @Column({ name: 'hourly_price_minor', type: 'bigint', transformer: minorUnits })
  hourlyPriceMinor: number;

  @Column({ name: 'duration_seconds', type: 'int', nullable: true })
  durationSeconds: number | null;

  @Column({ name: 'total_minor', type: 'bigint', transformer: minorUnits })
  totalMinor: number;

  @Column({ type: 'char', length: 3 })
  currency: string;

  /** Customer-safe failure code and reason, set with status FAILED. */
  @Column({ name: 'failure_code', type: 'varchar', length: 64, nullable: true })
  failureCode: FailureCode | null;

  @Column({ name: 'failure_reason', type: 'varchar', length: 255, nullable: true })
  failureReason: string | null;

  @Column({ name: 'reversal_status', type: 'varchar', length: 16, nullable: true })
  reversalStatus: ReversalStatus | null;

  @Column({ name: 'created_at', type: 'datetime', precision: 3 })
  createdAt: Date;

  @Column({ name: 'updated_at', type: 'datetime', precision: 3 })
  updatedAt: Date;

  /** The container image the rental asked for; null: the provider's or operator's default. */
  @Column({ name: 'machine_image', type: 'varchar', length: 512, nullable: true })
  machineImage: string | null;

  /** Names of the environment variables the rental set (their values are sealed in machineSecretsEnc). */
  @Column({ name: 'machine_env_names', type: 'json', nullable: true })
  machineEnvNames: string[] | null;

  /** TCP ports to expose over HTTP(S). */
  @Column({ name: 'machine_ports', type: 'json', nullable: true })
  machinePorts: number[] | null;

  /** Disk asked for, in GB; null: the offer's default. */
  @Column({ name: 'machine_disk_gb', type: 'int', nullable: true })
  machineDiskGb: number | null;

  /**
   * AES-256-GCM ciphertext of the agent's secrets for the machine (environment values and the
   * startup script, as JSON), sealed like SSH keys; never logged, never returned.
   */
  @Column({ name: 'machine_secrets_enc', type: 'mediumblob', nullable: true })
  machineSecretsEnc: Buffer | null;

  /** Id of the key-encryption key that sealed machineSecretsEnc. */
  @Column({ name: 'machine_secrets_kid', type: 'varchar', length: 32, nullable: true })
  machineSecretsKid: string | null;

  /** SHA-256 (hex) of the startup script, the only thing of it reads show. */
  @Column({ name: 'startup_script_sha256', type: 'char', length: 64, nullable: true })
  startupScriptSha256: string | null;

  /** The lease the rental asked for, counted from ACTIVE. */
  @Column({ name: 'terminate_after_seconds', type: 'int', nullable: true })
  terminateAfterSeconds: number | null;

  /** GPU intent: until when the rental may wait PENDING for an eligible offer to appear. */
  @Column({ name: 'wait_for_capacity_until', type: 'datetime', precision: 3, nullable: true })
  waitForCapacityUntil: Date | null;
}
