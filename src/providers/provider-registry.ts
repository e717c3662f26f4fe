import type { ProviderConfig } from '../config.js';
import { meteredProvider } from './metered-provider.js';
import type { Provider, ProviderDeps, ProviderPlugin } from './provider.js';

/** One configured provider and what the host needs besides the client: its markup and description. */
export interface RegisteredProvider {
  id: string;
  description: string;
  /** Percent added to the provider's costs for customer prices (`customerPriceMinor`). */
  markupPercent: number;
  provider: Provider;
}

/** The configured providers, by id, in configuration order. */
export class ProviderRegistry {
  private readonly entries = new Map<string, RegisteredProvider>();

  constructor(entries: Iterable<RegisteredProvider> = []) {
    for (const e of entries) this.register(e);
  }

  /** Adds a provider; ids are unique (a second instance of a plugin needs an id of its own). */
  register(entry: RegisteredProvider): void {
    if (entry.provider.id !== entry.id) throw new Error(`provider "${entry.provider.id}" registered as "${entry.id}"`);
    if (this.entries.has(entry.id)) throw new Error(`provider "${entry.id}" is already registered`);
    this.entries.set(entry.id, { ...entry, provider: meteredProvider(entry.provider) });
  }

  get(id: string): Provider {
    const p = this.entries.get(id);
    if (!p) throw new Error(`provider "${id}" is not configured`);
    return p.provider;
  }

  all(): Provider[] {
    return this.registered().map((e) => e.provider);
  }

  /** Every provider with its markup and description. */
  registered(): RegisteredProvider[] {
    return [...this.entries.values()];
  }

  async close(): Promise<void> {
    await Promise.all(this.all().map((p) => p.close?.()));
  }
}

export async function loadPlugin(id: string): Promise<ProviderPlugin> {
  let mod: { default?: ProviderPlugin };
  try {
    mod = await import(`../../plugins/${id}/index.js`);
  } catch (err) {
    throw new Error(`PROVIDERS names "${id}" but plugins/${id}/index could not be loaded: ${(err as Error).message}`);
  }
  const plugin = mod.default;
  if (
    !plugin ||
    plugin.id !== id ||
    typeof plugin.create !== 'function' ||
    typeof plugin.validateOptions !== 'function'
  ) {
    throw new Error(`plugins/${id}/index must export default { id: "${id}", validateOptions, create }`);
  }
  return plugin;
}

export async function createProviderRegistry(configs: ProviderConfig[], deps: ProviderDeps): Promise<ProviderRegistry> {
  const registry = new ProviderRegistry();
  for (const c of configs) {
    const plugin = await loadPlugin(c.id);
    const options = plugin.validateOptions(c.options);
    registry.register({
      id: c.id,
      description: plugin.description,
      markupPercent: c.markupPercent,
      provider: await plugin.create(options, deps),
    });
  }
  return registry;
}
