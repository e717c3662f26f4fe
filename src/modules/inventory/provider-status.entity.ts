import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * Outcome of the latest inventory refreshes of one provider, written by the refresh job (worker)
 * and read by every api process for `GET /api/v1/providers`. Error messages are not kept: they
 * can carry URLs; the class (`ProviderErrorClass`) is enough for a customer and the logs have the rest.
 */
@Entity({ name: 'provider_status' })
export class ProviderStatus {
  @PrimaryColumn({ name: 'provider_id', type: 'varchar', length: 32 })
  providerId: string;

  @Column({ name: 'last_refresh_at', type: 'datetime', precision: 3, nullable: true })
  lastRefreshAt: Date | null;

  /** Whether the latest refresh succeeded (timestamps alone can tie). */
  @Column({ name: 'last_refresh_ok', type: 'boolean' })
  lastRefreshOk: boolean;

  @Column({ name: 'last_success_at', type: 'datetime', precision: 3, nullable: true })
  lastSuccessAt: Date | null;

  /** Offers the provider listed at its last successful refresh. */
  @Column({ name: 'offer_count', type: 'int' })
  offerCount: number;

  @Column({ name: 'last_error_class', type: 'varchar', length: 32, nullable: true })
  lastErrorClass: string | null;

  @Column({ name: 'last_error_at', type: 'datetime', precision: 3, nullable: true })
  lastErrorAt: Date | null;
}
