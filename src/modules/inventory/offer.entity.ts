import { Column, Entity, PrimaryColumn } from 'typeorm';
import { minorUnits } from '../../db/columns.js';
import { trafficPriceOfColumns } from '../../providers/pricing.js';
import type { MachineCapabilities, TrafficPrice } from '../../providers/provider.js';

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

  /** Catalog model (see gpu-catalog.ts); the join key for /gpus and GPU-intent rentals. */
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

  /** Customer price: the provider's cost with the host's markup (src/providers/pricing.ts). */
  @Column({ name: 'price_per_hour_minor', type: 'bigint', transformer: minorUnits })
  pricePerHourMinor: number;

  /** What the provider charges us, whole cents per hour; null on rows cached before costs were kept. */
  @Column({ name: 'cost_per_hour_minor', type: 'bigint', nullable: true, transformer: minorUnits })
  costPerHourMinor: number | null;

  /** Where the machine would run, when the provider says. */
  @Column({ type: 'varchar', length: 64, nullable: true })
  region: string | null;

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

  /**
   * When the offer stops being live unless its provider lists it again: its last sighting plus
   * OFFER_MAX_AGE_SECONDS. A provider that keeps failing loses its offers at this moment.
   */
  @Column({ name: 'stale_at', type: 'datetime', precision: 3 })
  staleAt: Date;

  /** The machine can run an image the rental names (else the provider's or operator's default). */
  @Column({ name: 'cap_custom_image', type: 'boolean', default: false })
  capCustomImage: boolean;

  /** The machine can run a startup script once after boot. */
  @Column({ name: 'cap_startup_script', type: 'boolean', default: false })
  capStartupScript: boolean;

  /** How many TCP ports the machine can expose over HTTP(S); 0 = none. */
  @Column({ name: 'cap_ports', type: 'int', default: 0 })
  capPorts: number;

  /** Largest disk a rental may ask for, in GB; null: the disk cannot be chosen. */
  @Column({ name: 'cap_max_disk_gb', type: 'int', nullable: true })
  capMaxDiskGb: number | null;

  /** What the provider charges us per GB sent / received, millionths of a USD; null: traffic is free. */
  @Column({ name: 'traffic_up_cost_micro', type: 'int', nullable: true })
  trafficUpCostMicro: number | null;

  @Column({ name: 'traffic_down_cost_micro', type: 'int', nullable: true })
  trafficDownCostMicro: number | null;

  /** The customer's per-GB prices: the costs with the markup (src/providers/pricing.ts); null: free. */
  @Column({ name: 'traffic_up_price_micro', type: 'int', nullable: true })
  trafficUpPriceMicro: number | null;

  @Column({ name: 'traffic_down_price_micro', type: 'int', nullable: true })
  trafficDownPriceMicro: number | null;
}

/** What a cached offer's machine can be given, as its provider last declared it. */
export function offerCapabilities(o: Offer): MachineCapabilities {
  return {
    customImage: o.capCustomImage,
    startupScript: o.capStartupScript,
    ports: o.capPorts,
    maxDiskGb: o.capMaxDiskGb,
  };
}

/** What the provider charges us per GB of a cached offer's traffic; undefined when its traffic is free. */
export function offerTrafficCost(o: Offer): TrafficPrice | undefined {
  return trafficPriceOfColumns(o.trafficUpCostMicro, o.trafficDownCostMicro) ?? undefined;
}
