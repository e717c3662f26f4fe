import { CheckCalls } from '../../src/providers/kit/check-calls.js';
import type { ProviderCheck } from '../../src/providers/provider-check.js';
import type { ProviderOffer } from '../../src/providers/provider.js';
import type { LocalInventory } from './inventory.js';

/**
 * The local provider's check: it signs in to nothing and calls no API, so it reads the inventory
 * its offers come from (the file of `LOCAL_PROVIDER_INVENTORY`, or the built-in one) and counts the
 * offers the inventory marks unavailable.
 */
export async function checkLocal(p: {
  inventory(): Promise<LocalInventory>;
  listOffers(): Promise<ProviderOffer[]>;
}): Promise<ProviderCheck> {
  const calls = new CheckCalls();
  const read = await calls.run(
    'read the inventory',
    async () => ({ all: (await p.inventory()).offers.length, listed: (await p.listOffers()).length }),
    (n) => `${n.all} offers in the inventory`,
  );
  const unavailable = read.ok ? read.value.all - read.value.listed : 0;
  return {
    calls: calls.calls,
    credentials: { accepted: true, detail: 'none needed: the machines run on this host' },
    offers: {
      considered: read.ok ? read.value.all : 0,
      parsed: read.ok ? read.value.listed : 0,
      dropped: unavailable > 0 ? { unavailable } : {},
      hints: unavailable > 0 ? { unavailable: 'offers the inventory marks "available": false' } : {},
      ...(read.ok ? {} : { detail: `the inventory could not be read: ${read.detail}` }),
    },
    userAgent: { sent: null, accepted: true, detail: 'no HTTP API: there is no edge to refuse it' },
  };
}
