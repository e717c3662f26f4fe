import type { DataSource } from 'typeorm';
import type { ProviderErrorClass } from '../../providers/provider.js';
import type { RegisteredProvider } from '../../providers/provider-registry.js';
import type { ProviderHealth, ProviderStatusDto } from './inventory.dto.js';
import { ProviderStatus } from './provider-status.entity.js';

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

/**
 * Records a configuration or request error a provider answered outside the inventory refresh (a
 * create it rejected), so `GET /api/v1/providers` shows it as the provider's last error until a
 * later one replaces it. Capacity refusals are not errors and are never recorded.
 */
export async function recordProviderError(ds: DataSource, providerId: string, errorClass: ProviderErrorClass, at: Date): Promise<void> {
  await ds.query(
    `INSERT INTO provider_status (provider_id, last_refresh_at, last_refresh_ok, offer_count, last_error_class, last_error_at) VALUES (?, NULL, 0, 0, ?, ?)
     ON DUPLICATE KEY UPDATE last_error_class = ?, last_error_at = ?`,
    [providerId, errorClass, at, errorClass, at],
  );
}

/**
 * `ok` while the latest refresh succeeded, `degraded` while it failed but the last success is
 * within the offer age bound (its offers are still live), `down` otherwise.
 */
export function providerHealth(row: ProviderStatus | undefined, now: Date, offerMaxAgeSeconds: number): ProviderHealth {
  const success = row?.lastSuccessAt;
  if (!success || now.getTime() - success.getTime() >= offerMaxAgeSeconds * 1000) return 'down';
  return row.lastRefreshOk ? 'ok' : 'degraded';
}

/** The configured providers, in configuration order, with their recorded refresh outcomes. */
export async function providerStatuses(
  ds: DataSource,
  registered: RegisteredProvider[],
  liveOffers: Map<string, number>,
  now: Date,
  offerMaxAgeSeconds: number,
): Promise<ProviderStatusDto[]> {
  const rows = await ds.getRepository(ProviderStatus).find();
  const byId = new Map(rows.map((r) => [r.providerId, r]));
  return registered.map((p) => {
    const row = byId.get(p.id);
    return {
      id: p.id,
      description: p.description,
      status: providerHealth(row, now, offerMaxAgeSeconds),
      lastRefreshAt: iso(row?.lastRefreshAt ?? null),
      lastSuccessAt: iso(row?.lastSuccessAt ?? null),
      offerCount: liveOffers.get(p.id) ?? 0,
      lastErrorClass: row?.lastErrorClass ?? null,
      lastErrorAt: iso(row?.lastErrorAt ?? null),
    };
  });
}
