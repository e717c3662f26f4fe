import { isAbsolute } from 'node:path';
import { declareOptions, parseOptions } from '../../src/providers/kit/options.js';
import type { ProviderPlugin } from '../../src/providers/provider.js';
import { readInventoryFile } from './inventory.js';
import { LocalProvider, type LocalOptions } from './local-provider.js';
import { SANDBOX_UID_COUNT, SANDBOX_UID_FIRST, shellIsolation, UID_MAX, usesSandboxUids } from './sandbox.js';
import { claimSandboxUids, SANDBOX_UID_CLAIMS_DIR, serviceIdentity } from './uid-claims.js';

/** The `LOCAL_PROVIDER_*` options. */
export const LOCAL_OPTIONS = declareOptions({
  providerId: 'local',
  options: {
    INVENTORY: { kind: 'string' },
    ALLOW_PRODUCTION: { kind: 'flag' },
    // Above every id a distribution gives users and system accounts (65534 and under).
    SANDBOX_UID_FIRST: { kind: 'integer', min: 65_536, max: UID_MAX, default: SANDBOX_UID_FIRST },
    SANDBOX_UID_COUNT: { kind: 'integer', min: 1, max: 10_000_000, default: SANDBOX_UID_COUNT },
    SANDBOX_UID_CLAIMS_DIR: { kind: 'string', noSpaces: true, default: SANDBOX_UID_CLAIMS_DIR },
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
    if (!isAbsolute(o.SANDBOX_UID_CLAIMS_DIR)) {
      throw new Error(
        `LOCAL_PROVIDER_SANDBOX_UID_CLAIMS_DIR must be an absolute path, got "${o.SANDBOX_UID_CLAIMS_DIR}"`,
      );
    }
    return {
      inventoryPath: o.INVENTORY,
      allowProduction: o.ALLOW_PRODUCTION,
      sandboxUids: { first: o.SANDBOX_UID_FIRST, last },
      sandboxUidClaimsDir: o.SANDBOX_UID_CLAIMS_DIR,
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
    const isolation = shellIsolation();
    // Claimed before any machine can be handed a uid: another service's block is refused at start.
    const uidClaim = usesSandboxUids()
      ? await claimSandboxUids({
          dir: options.sandboxUidClaimsDir,
          ...options.sandboxUids,
          service: serviceIdentity(deps.dataSource),
        })
      : undefined;
    return new LocalProvider(options, deps, isolation, uidClaim);
  },
};

export default plugin;
