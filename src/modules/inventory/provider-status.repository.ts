import type { DataSource, EntityManager } from 'typeorm';
import type { ProviderErrorClass } from '../../providers/provider.js';
import { ProviderStatus } from './provider-status.entity.js';

// The only code that reads or writes `provider_status`: the refresh's outcome per provider, and
// errors a provider answered outside the refresh.

/** Every provider's recorded outcomes, configured or not. */
export async function allProviderStatuses(ds: DataSource): Promise<ProviderStatus[]> {
  return ds.getRepository(ProviderStatus).find();
}

/** A successful refresh of `provider` at `now` that listed `offerCount` offers, in the refresh's transaction. */
export async function recordRefreshSuccess(
  m: EntityManager,
  provider: string,
  now: Date,
  offerCount: number,
): Promise<void> {
  await m.query(
    `INSERT INTO provider_status (provider_id, last_refresh_at, last_refresh_ok, last_success_at, offer_count) VALUES (?, ?, 1, ?, ?)
         ON DUPLICATE KEY UPDATE last_refresh_at = VALUES(last_refresh_at), last_refresh_ok = 1, last_success_at = VALUES(last_success_at),
           offer_count = VALUES(offer_count)`,
    [provider, now, now, offerCount],
  );
}

/** A failed refresh of `provider` at `now`, in the refresh's transaction; the last success and its count stay. */
export async function recordRefreshFailure(
  m: EntityManager,
  provider: string,
  now: Date,
  errorClass: ProviderErrorClass,
): Promise<void> {
  await m.query(
    `INSERT INTO provider_status (provider_id, last_refresh_at, last_refresh_ok, offer_count, last_error_class, last_error_at) VALUES (?, ?, 0, 0, ?, ?)
         ON DUPLICATE KEY UPDATE last_refresh_at = VALUES(last_refresh_at), last_refresh_ok = 0, last_error_class = VALUES(last_error_class),
           last_error_at = VALUES(last_error_at)`,
    [provider, now, errorClass, now],
  );
}

/**
 * Records a configuration or request error a provider answered outside the inventory refresh (a
 * create it rejected), so `GET /api/v1/providers` shows it as the provider's last error until a
 * later one replaces it; the refresh outcome is left as it was. Capacity refusals are not errors
 * and are never recorded.
 */
export async function recordProviderError(
  ds: DataSource,
  providerId: string,
  errorClass: ProviderErrorClass,
  at: Date,
): Promise<void> {
  await ds.query(
    `INSERT INTO provider_status (provider_id, last_refresh_at, last_refresh_ok, offer_count, last_error_class, last_error_at) VALUES (?, NULL, 0, 0, ?, ?)
     ON DUPLICATE KEY UPDATE last_error_class = ?, last_error_at = ?`,
    [providerId, errorClass, at, errorClass, at],
  );
}
