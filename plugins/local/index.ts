import { declareOptions, parseOptions } from '../../src/providers/kit/options.js';
import type { ProviderPlugin } from '../../src/providers/provider.js';
import { readInventoryFile } from './inventory.js';
import { LocalProvider, type LocalOptions } from './local-provider.js';

/** The `LOCAL_PROVIDER_*` options. */
export const LOCAL_OPTIONS = declareOptions({
  providerId: 'local',
  options: {
    INVENTORY: { kind: 'string' },
    ALLOW_PRODUCTION: { kind: 'flag' },
  },
});

const plugin: ProviderPlugin<LocalOptions> = {
  id: 'local',
  description: 'Simulated GPU inventory; each instance is a real SSH endpoint on 127.0.0.1',
  validateOptions(raw) {
    const o = parseOptions(LOCAL_OPTIONS, raw);
    return { inventoryPath: o.INVENTORY, allowProduction: o.ALLOW_PRODUCTION };
  },
  async create(options, deps) {
    if (deps.production && !options.allowProduction) {
      throw new Error(
        'the local provider runs commands on this host and refuses to load with NODE_ENV=production; set LOCAL_PROVIDER_ALLOW_PRODUCTION=true to override',
      );
    }
    if (options.inventoryPath) {
      // Read once at start so a wrong path or a broken file stops the service with a clear line;
      // later refreshes re-read it (and keep the last good offers if an edit breaks it).
      try {
        await readInventoryFile(options.inventoryPath);
      } catch (err) {
        throw new Error(`LOCAL_PROVIDER_INVENTORY: ${(err as Error).message}`);
      }
    }
    return new LocalProvider(options, deps);
  },
};

export default plugin;
