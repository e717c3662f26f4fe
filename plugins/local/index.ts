import { declareOptions, parseOptions } from '../../src/providers/kit/options.js';
import type { ProviderPlugin } from '../../src/providers/provider.js';
import { readInventoryFile } from './inventory.js';
import { LocalProvider, type LocalOptions } from './local-provider.js';
import { SANDBOX_UID_COUNT, SANDBOX_UID_FIRST } from './sandbox.js';

/** The highest uid Linux hands out: (uid_t)-1 is "no uid". */
const UID_MAX = 4_294_967_294;

/** The `LOCAL_PROVIDER_*` options. */
export const LOCAL_OPTIONS = declareOptions({
  providerId: 'local',
  options: {
    INVENTORY: { kind: 'string' },
    ALLOW_PRODUCTION: { kind: 'flag' },
    // Above every id a distribution gives users and system accounts (65534 and under).
    SANDBOX_UID_FIRST: { kind: 'integer', min: 65_536, max: UID_MAX, default: SANDBOX_UID_FIRST },
    SANDBOX_UID_COUNT: { kind: 'integer', min: 1, max: 10_000_000, default: SANDBOX_UID_COUNT },
  },
});

const plugin: ProviderPlugin<LocalOptions> = {
  id: 'local',
  description: 'Simulated GPU inventory; each instance is a real SSH endpoint on 127.0.0.1',
  validateOptions(raw) {
    const o = parseOptions(LOCAL_OPTIONS, raw);
    const last = o.SANDBOX_UID_FIRST + o.SANDBOX_UID_COUNT - 1;
    if (last > UID_MAX) {
      throw new Error(
        `LOCAL_PROVIDER_SANDBOX_UID_FIRST plus LOCAL_PROVIDER_SANDBOX_UID_COUNT runs past uid ${UID_MAX}; give a lower first uid or fewer uids`,
      );
    }
    return {
      inventoryPath: o.INVENTORY,
      allowProduction: o.ALLOW_PRODUCTION,
      sandboxUids: { first: o.SANDBOX_UID_FIRST, last },
    };
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
