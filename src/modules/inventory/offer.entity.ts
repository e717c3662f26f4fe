import { Column, Entity, PrimaryColumn } from 'typeorm';
import { minorUnits } from '../../db/columns.js';

/** One cached provider offer. Rows are never deleted: vanished offers are marked unavailable. */
@Entity({ name: 'offers' })
export class Offer {
  /** UUIDv5 of provider, offer key, price and shape: stable while the offer is unchanged. */
  @PrimaryColumn({ type: 'char', length: 36 })
  id: string;

  @Column({ type: 'varchar', length: 32 })
  provider: string;

  @Column({ name: 'provider_offer_key', type: 'varchar', length: 191 })
  providerOfferKey: string;

  @Column({ type: 'varchar', length: 100 })
  name: string;

  /** Normalized GPU model (see gpu-slug.ts); the join key for /gpus and GPU-intent rentals. */
  @Column({ type: 'varchar', length: 100 })
  slug: string;

  @Column({ type: 'varchar', length: 64 })
  category: string;

  @Column({ name: 'vram_gb', type: 'int', nullable: true })
  vramGb: number | null;

  @Column({ name: 'gpu_count', type: 'int' })
  gpuCount: number;

  @Column({ name: 'cpu_cores', type: 'int', nullable: true })
  cpuCores: number | null;

  @Column({ name: 'memory_gb', type: 'int', nullable: true })
  memoryGb: number | null;

  @Column({ name: 'storage_gb', type: 'int', nullable: true })
  storageGb: number | null;

  @Column({ name: 'price_per_hour_minor', type: 'bigint', transformer: minorUnits })
  pricePerHourMinor: number;

  @Column({ type: 'char', length: 3 })
  currency: string;

  @Column({ name: 'maximum_duration_seconds', type: 'int' })
  maximumDurationSeconds: number;

  @Column({ type: 'boolean' })
  available: boolean;

  @Column({ name: 'first_seen_at', type: 'datetime', precision: 3 })
  firstSeenAt: Date;

  @Column({ name: 'last_seen_at', type: 'datetime', precision: 3 })
  lastSeenAt: Date;
}
