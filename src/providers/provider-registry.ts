import type { ProviderConfig } from '../config.js';
import { DriftLog } from './drift-log.js';
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

/** What the host gives the plugins, with the drift recorder it is: the registry writes it to the store. */
export type HostedProviderDeps = ProviderDeps & { drift: DriftLog };

/** The configured providers, by id, in configuration order. */
export class ProviderRegistry {
  private readonly entries = new Map<string, RegisteredProvider>();

  /**
   * @param drift Where the plugins' drift is recorded (the one their `ProviderDeps.drift` is); the
   *   composition root attaches the store to it. A registry given none keeps its own, which only counts.
   */
  constructor(
    entries: Iterable<RegisteredProvider> = [],
    readonly drift: DriftLog = new DriftLog(),
  ) {
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

  /** Closes every provider, then writes the drift still held. */
  async close(): Promise<void> {
    await Promise.all(this.all().map((p) => p.close?.()));
    await this.drift.close();
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

/**
 * Loads and creates each configured plugin. Every plugin records its drift into one `DriftLog`:
 * `deps.drift` when given (a test's), else one made here on the host's clock and logger.
 */
export async function createProviderRegistry(
  configs: ProviderConfig[],
  deps: Omit<ProviderDeps, 'drift'> & { drift?: DriftLog },
): Promise<ProviderRegistry> {
  const drift = deps.drift ?? new DriftLog({ logger: deps.logger, now: () => deps.clock.now() });
  const hosted: HostedProviderDeps = { ...deps, drift };
  const registry = new ProviderRegistry([], drift);
  for (const c of configs) {
    const plugin = await loadPlugin(c.id);
    const options = plugin.validateOptions(c.options);
    registry.register({
      id: c.id,
      description: plugin.description,
      markupPercent: c.markupPercent,
      provider: await plugin.create(options, hosted),
    });
  }
  return registry;
}
