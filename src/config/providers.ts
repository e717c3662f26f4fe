import { ConfigError, int, list, opt, type Env } from '../config-values.js';

/** One provider plugin to load, with what the host takes from its variables. */
export interface ProviderConfig {
  id: string;
  /** Raw string options taken from `<ID>_PROVIDER_<NAME>` variables, validated by the plugin. */
  options: Record<string, string>;
  /**
   * Percent added to this provider's costs for customer prices: `<ID>_PROVIDER_MARKUP_PERCENT`,
   * else `PRICE_MARKUP_PERCENT`. Taken out of `options`: the host prices, not the plugin.
   */
  markupPercent: number;
}

/** How the offer cache follows the providers. */
export interface InventoryConfig {
  /** How often a worker refreshes the offer cache (INVENTORY_REFRESH_SECONDS). */
  refreshSeconds: number;
  /**
   * How long a provider's offers stay live after its last successful refresh: a provider that
   * keeps failing loses its offers from /offers, /gpus and admission after this.
   */
  offerMaxAgeSeconds: number;
}

/** What a rental's `machine` may ask for. */
export interface MachinesConfig {
  /** Glob patterns (`*` = any run of characters) a rental's `machine.image` must match; empty: any image. */
  imageAllowlist: string[];
  /** Largest disk a rental may ask for, in GB. */
  maxDiskGb: number;
}

/** PROVIDERS and every `<ID>_PROVIDER_<NAME>` of the providers it names. */
export function readProviders(env: Env): ProviderConfig[] {
  const ids = list(env, 'PROVIDERS', {
    item: /^[a-z][a-z0-9-]{0,31}$/,
    help: 'provider plugin ids (folders under plugins/, such as local or vast)',
  }) ?? ['local'];
  if (new Set(ids).size !== ids.length) throw new ConfigError('PROVIDERS lists a plugin twice');
  const globalMarkup = markup(env, 'PRICE_MARKUP_PERCENT', 0);
  return ids.map((id) => {
    const prefix = `${id.toUpperCase().replace(/-/g, '_')}_PROVIDER_`;
    const options: Record<string, string> = {};
    for (const [k, v] of Object.entries(env)) {
      if (k.startsWith(prefix) && v !== undefined && v !== '') options[k.slice(prefix.length)] = v;
    }
    const markupPercent = markup(env, `${prefix}MARKUP_PERCENT`, globalMarkup);
    delete options.MARKUP_PERCENT;
    return { id, options, markupPercent };
  });
}

/** A markup percentage: 0 to 1000 with at most two decimals, so prices stay exact in cents. */
function markup(env: Env, name: string, fallback: number): number {
  const raw = opt(env, name);
  if (raw === undefined) return fallback;
  if (!/^\d{1,4}(\.\d{1,2})?$/.test(raw) || Number(raw) > 1000) {
    throw new ConfigError(`${name} must be a percentage from 0 to 1000 with at most two decimals, got "${raw}"`);
  }
  return Number(raw);
}

/** INVENTORY_REFRESH_SECONDS and OFFER_MAX_AGE_SECONDS. */
export function readInventory(env: Env): InventoryConfig {
  const refreshSeconds = int(env, 'INVENTORY_REFRESH_SECONDS', 30, 1, 86400);
  const offerMaxAgeSeconds = int(env, 'OFFER_MAX_AGE_SECONDS', 600, 1, 7 * 86400);
  if (offerMaxAgeSeconds <= refreshSeconds) {
    // Otherwise every offer would drop out between two healthy refreshes.
    throw new ConfigError(
      `OFFER_MAX_AGE_SECONDS (${offerMaxAgeSeconds}) must be greater than INVENTORY_REFRESH_SECONDS (${refreshSeconds})`,
    );
  }
  return { refreshSeconds, offerMaxAgeSeconds };
}

/**
 * MACHINE_IMAGE_ALLOWLIST (patterns of the characters an image reference may hold, plus `*`:
 * anything else, a space or a quote, could never match a reference, so it is a typo) and
 * MACHINE_MAX_DISK_GB.
 */
export function readMachines(env: Env): MachinesConfig {
  return {
    imageAllowlist:
      list(env, 'MACHINE_IMAGE_ALLOWLIST', {
        item: /^[A-Za-z0-9._/:@*-]+$/,
        help: 'image patterns (letters, digits, . _ - / : @, and * for any run of characters)',
      }) ?? [],
    maxDiskGb: int(env, 'MACHINE_MAX_DISK_GB', 1000, 1, 100_000),
  };
}
