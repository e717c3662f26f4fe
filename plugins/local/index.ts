import type { ProviderPlugin } from '../../src/providers/provider.js';
import { readInventoryFile } from './inventory.js';
import { LocalProvider, type LocalOptions } from './local-provider.js';

function flag(raw: string | undefined, name: string): boolean {
  if (raw === undefined) return false;
  const v = raw.trim().toLowerCase();
  if (['true', '1', 'yes'].includes(v)) return true;
  if (['false', '0', 'no'].includes(v)) return false;
  throw new Error(`${name} must be true or false, got "${raw}"`);
}

const plugin: ProviderPlugin<LocalOptions> = {
  id: 'local',
  description: 'Simulated GPU inventory; each instance is a real SSH endpoint on 127.0.0.1',
  validateOptions(raw) {
    const known = ['INVENTORY', 'ALLOW_PRODUCTION'];
    for (const k of Object.keys(raw)) {
      if (!known.includes(k)) throw new Error(`LOCAL_PROVIDER_${k} is not an option of the local provider (known: ${known.map((n) => `LOCAL_PROVIDER_${n}`).join(', ')})`);
    }
    return {
      inventoryPath: raw.INVENTORY,
      allowProduction: flag(raw.ALLOW_PRODUCTION, 'LOCAL_PROVIDER_ALLOW_PRODUCTION'),
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
