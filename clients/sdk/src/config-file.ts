import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** What `gpr signup` / `gpr setup` remember between runs; `gpr-mcp` reads it too. */
export interface StoredConfig {
  baseUrl?: string;
  token?: string;
}

export const DEFAULT_BASE_URL = 'http://localhost:8080';

/** The base URL a served package carries (see `PACKAGED_SERVICE_FILE`), read from `file`; undefined when absent or unreadable. */
export function packagedBaseUrl(file: URL): string | undefined {
  try {
    const { baseUrl } = JSON.parse(readFileSync(file, 'utf8')) as { baseUrl?: unknown };
    return typeof baseUrl === 'string' && /^https?:\/\/[^\s]+$/.test(baseUrl) ? baseUrl : undefined;
  } catch {
    return undefined;
  }
}

/** `$XDG_CONFIG_HOME/gpr` (default `~/.config/gpr`). */
export function configDir(): string {
  const xdg = process.env.XDG_CONFIG_HOME?.trim();
  return join(xdg ? xdg : join(homedir(), '.config'), 'gpr');
}

export function configPath(): string {
  return join(configDir(), 'config.json');
}

export function readStoredConfig(): StoredConfig {
  try {
    return JSON.parse(readFileSync(configPath(), 'utf8')) as StoredConfig;
  } catch {
    return {};
  }
}

/** Writes the config readable by its owner only (it holds the token). */
export function writeStoredConfig(config: StoredConfig): string {
  mkdirSync(configDir(), { recursive: true, mode: 0o700 });
  const path = configPath();
  writeFileSync(path, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  chmodSync(path, 0o600);
  return path;
}

/**
 * Effective settings: flags, then GPR_TOKEN / GPR_BASE_URL, then the config file, then the
 * service the package was installed from (`packaged`), then {@link DEFAULT_BASE_URL}.
 */
export function effectiveSettings(
  flags: { baseUrl?: string },
  packaged?: string,
): { baseUrl: string; token?: string; retries?: number } {
  const stored = readStoredConfig();
  const retries = process.env.GPR_RETRIES?.trim();
  return {
    baseUrl: (
      flags.baseUrl ??
      (process.env.GPR_BASE_URL?.trim() || undefined) ??
      stored.baseUrl ??
      packaged ??
      DEFAULT_BASE_URL
    ).replace(/\/+$/, ''),
    token: process.env.GPR_TOKEN?.trim() || stored.token,
    retries: retries && /^\d+$/.test(retries) ? Number(retries) : undefined,
  };
}
