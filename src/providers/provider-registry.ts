import type { ProviderConfig } from '../config.js';
import type { Provider, ProviderDeps, ProviderPlugin } from './provider.js';

/** The configured providers, by id. */
export class ProviderRegistry {
  constructor(private readonly providers: Map<string, Provider>) {}

  get(id: string): Provider {
    const p = this.providers.get(id);
    if (!p) throw new Error(`provider "${id}" is not configured`);
    return p;
  }

  all(): Provider[] {
    return [...this.providers.values()];
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
  if (!plugin || plugin.id !== id || typeof plugin.create !== 'function' || typeof plugin.validateOptions !== 'function') {
    throw new Error(`plugins/${id}/index must export default { id: "${id}", validateOptions, create }`);
  }
  return plugin;
}

export async function createProviderRegistry(configs: ProviderConfig[], deps: ProviderDeps): Promise<ProviderRegistry> {
  const map = new Map<string, Provider>();
  for (const c of configs) {
    const plugin = await loadPlugin(c.id);
    const options = plugin.validateOptions(c.options);
    map.set(c.id, await plugin.create(options, deps));
  }
  return new ProviderRegistry(map);
}
