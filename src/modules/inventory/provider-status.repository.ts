import type { DataSource } from 'typeorm';
import type { Executor } from '../../db/mysql-store.js';
import type { ProviderErrorClass } from '../../providers/provider.js';
import { ProviderStatus } from './provider-status.entity.js';
import { entityReader } from './offers.repository.js';

// The only code that reads or writes `provider_status`: the refresh's outcome per provider, and
// errors a provider answered outside the refresh.

/** Each provider's recorded refresh outcomes and its last error: the aggregate's other half. */
export interface ProviderStatusRepository {
  /** Every provider's recorded outcomes, configured or not, in no particular order. */
  all(): Promise<ProviderStatus[]>;
  /**
   * A successful refresh of `provider` at `now` that listed `offerCount` offers, in the
   * refresh's transaction: the refresh time and the last success are `now`; the last error stays.
   */
  recordRefreshSuccess(provider: string, now: Date, offerCount: number): Promise<void>;
  /**
   * A failed refresh of `provider` at `now`, in the refresh's transaction: the refresh time and
   * the last error are `now`; the last success and its count stay (0 offers for a provider never
   * refreshed before).
   */
  recordRefreshFailure(provider: string, now: Date, errorClass: ProviderErrorClass): Promise<void>;
  /**
   * Records a configuration or request error a provider answered outside the inventory refresh
   * (a create it rejected), so `GET /api/v1/providers` shows it as the provider's last error until
   * a later one replaces it; the refresh outcome is left as it was (a provider never refreshed
   * has none). Capacity refusals are not errors and are never recorded.
   */
  recordError(provider: string, errorClass: ProviderErrorClass, at: Date): Promise<void>;
}

export class MysqlProviderStatusRepository implements ProviderStatusRepository {
  constructor(private readonly sql: Executor) {}

  all(): Promise<ProviderStatus[]> {
    return entityReader(this.sql).getRepository(ProviderStatus).find();
  }

  async recordRefreshSuccess(provider: string, now: Date, offerCount: number): Promise<void> {
    await this.sql.query(
      `INSERT INTO provider_status (provider_id, last_refresh_at, last_refresh_ok, last_success_at, offer_count) VALUES (?, ?, 1, ?, ?)
         ON DUPLICATE KEY UPDATE last_refresh_at = VALUES(last_refresh_at), last_refresh_ok = 1, last_success_at = VALUES(last_success_at),
           offer_count = VALUES(offer_count)`,
      [provider, now, now, offerCount],
    );
  }

  async recordRefreshFailure(provider: string, now: Date, errorClass: ProviderErrorClass): Promise<void> {
    await this.sql.query(
      `INSERT INTO provider_status (provider_id, last_refresh_at, last_refresh_ok, offer_count, last_error_class, last_error_at) VALUES (?, ?, 0, 0, ?, ?)
         ON DUPLICATE KEY UPDATE last_refresh_at = VALUES(last_refresh_at), last_refresh_ok = 0, last_error_class = VALUES(last_error_class),
           last_error_at = VALUES(last_error_at)`,
      [provider, now, errorClass, now],
    );
  }

  async recordError(provider: string, errorClass: ProviderErrorClass, at: Date): Promise<void> {
    await this.sql.query(
      `INSERT INTO provider_status (provider_id, last_refresh_at, last_refresh_ok, offer_count, last_error_class, last_error_at) VALUES (?, NULL, 0, 0, ?, ?)
     ON DUPLICATE KEY UPDATE last_error_class = ?, last_error_at = ?`,
      [provider, errorClass, at, errorClass, at],
    );
  }
}

/** See {@link ProviderStatusRepository.recordError}: for the provision job, not yet on the store. */
export async function recordProviderError(
  ds: DataSource,
  providerId: string,
  errorClass: ProviderErrorClass,
  at: Date,
): Promise<void> {
  await new MysqlProviderStatusRepository(ds).recordError(providerId, errorClass, at);
}
