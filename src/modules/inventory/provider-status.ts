import type { DataSource } from 'typeorm';
import type { RegisteredProvider } from '../../providers/provider-registry.js';
import type { ProviderHealth, ProviderStatusDto } from './inventory.dto.js';
import type { ProviderStatus } from './provider-status.entity.js';
import { allProviderStatuses } from './provider-status.repository.js';

// Provisioning records the errors a provider answers outside the refresh through here.

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

/** The configured providers, in configuration order, with their recorded refresh outcomes. */
export async function providerStatuses(
  ds: DataSource,
  registered: RegisteredProvider[],
  liveOffers: Map<string, number>,
  now: Date,
  offerMaxAgeSeconds: number,
): Promise<ProviderStatusDto[]> {
  const rows = await allProviderStatuses(ds);
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

/**
 * What an operator should look at for a provider that is not `ok`, by the class of its last
 * error, naming the setting: a refused key and an unreachable cloud look alike from afar.
 */
export function providerAdvice(providerId: string, health: ProviderHealth, errorClass: string | null): string {
  const prefix = `${providerId.toUpperCase().replace(/-/g, '_')}_PROVIDER`;
  const why =
    errorClass === 'auth'
      ? `${prefix}_API_KEY refused (auth)`
      : errorClass === 'unavailable' || errorClass === 'timeout'
        ? `${prefix}_API_URL unreachable (${errorClass})`
        : errorClass === 'rate_limited'
          ? 'throttled by the cloud (rate_limited): it recovers by itself'
          : errorClass === 'bad_response' || errorClass === 'request'
            ? `the cloud's answer was not understood (${errorClass}): see the worker's log`
            : errorClass === null
              ? 'no successful refresh yet: is a worker running?'
              : `last error ${errorClass}: see the worker's log`;
  return `${providerId} ${health}: ${why}`;
}
