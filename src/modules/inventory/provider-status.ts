import { providerFailureCause } from '../../providers/provider-failures.js';
import type { RegisteredProvider } from '../../providers/provider-registry.js';
import type { ProviderHealth, ProviderStatusDto } from './inventory.dto.js';
import type { ProviderStatus } from './provider-status.entity.js';

// What GET /api/v1/providers and readiness say of each provider, from its recorded refresh outcomes.

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

/**
 * `ok` while the latest refresh succeeded, `degraded` while it failed but the last success is
 * within the offer age bound (its offers are still live), `down` otherwise.
 */
export function providerHealth(row: ProviderStatus | undefined, now: Date, offerMaxAgeSeconds: number): ProviderHealth {
  const success = row?.lastSuccessAt;
  if (!success || now.getTime() - success.getTime() >= offerMaxAgeSeconds * 1000) return 'down';
  return row.lastRefreshOk ? 'ok' : 'degraded';
}

/**
 * The configured providers, in configuration order, with their recorded refresh outcomes (`rows`,
 * every provider's, configured or not) and their live offers counted in `liveOffers`.
 */
export function providerStatuses(
  rows: readonly ProviderStatus[],
  registered: readonly RegisteredProvider[],
  liveOffers: ReadonlyMap<string, number>,
  now: Date,
  offerMaxAgeSeconds: number,
): ProviderStatusDto[] {
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

/** What an operator should look at for a provider that is not `ok` (see {@link providerFailureCause}). */
export function providerAdvice(providerId: string, health: ProviderHealth, errorClass: string | null): string {
  return `${providerId} ${health}: ${providerFailureCause(providerId, errorClass)}`;
}
