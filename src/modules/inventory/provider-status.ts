import type { Store } from '../../db/store.js';
import { providerFailureCause } from '../../providers/provider-failures.js';
import type { ProviderRegistry, RegisteredProvider } from '../../providers/provider-registry.js';
import type { InventoryRepository } from './inventory.repository.js';
import type { ProviderDto, ProviderHealth, ProviderStatusDto } from './inventory.dto.js';
import type { DriftCounts, ProviderDriftRepository } from './provider-drift.repository.js';
import type { ProviderStatus } from './provider-status.entity.js';

// What GET /api/v1/providers and readiness say of each provider, from its recorded refresh
// outcomes and the drift report.

/** Where the inventory service reads: the inventory aggregate, and the drift report for the provider listing. */
export type ProviderStatusStore = Store<{ inventory: InventoryRepository; providerDrift: ProviderDriftRepository }>;

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

/**
 * {@link providerStatuses} of the registry's providers, from the refresh outcomes in `store` (one
 * query: readiness asks it); `offers` are the live offers the process serves.
 */
export async function readProviderStatuses(
  store: ProviderStatusStore,
  offers: readonly { provider: string }[],
  registry: Pick<ProviderRegistry, 'registered'>,
  now: Date,
  options: { offerMaxAgeSeconds: number },
): Promise<ProviderStatusDto[]> {
  const live = new Map<string, number>();
  for (const o of offers) live.set(o.provider, (live.get(o.provider) ?? 0) + 1);
  const rows = await store.read((r) => r.inventory.providerStatus.all());
  return providerStatuses(rows, registry.registered(), live, now, options.offerMaxAgeSeconds);
}

/** `statuses` with each provider's shapes in the drift report (`drift`; none for a provider without). */
export function withDriftCounts(
  statuses: readonly ProviderStatusDto[],
  drift: ReadonlyMap<string, DriftCounts>,
): ProviderDto[] {
  return statuses.map((s) => ({ ...s, drift: drift.get(s.id) ?? { shapes: 0, seen: 0 } }));
}

/** What an operator should look at for a provider that is not `ok` (see {@link providerFailureCause}). */
export function providerAdvice(providerId: string, health: ProviderHealth, errorClass: string | null): string {
  return `${providerId} ${health}: ${providerFailureCause(providerId, errorClass)}`;
}
