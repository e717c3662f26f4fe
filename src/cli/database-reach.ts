import type { Config } from '../config.js';
import { createDatabaseIfMissing, describeTarget, parseDatabaseUrl } from '../db/data-source.js';

/**
 * Makes sure an owner command's database exists (created if missing, as every process does); false,
 * with one line on `err` naming where and why, when MySQL is out of reach (the command then exits 1).
 */
export async function reachDatabase(config: Config, err: (text: string) => void): Promise<boolean> {
  try {
    await createDatabaseIfMissing(config.db.url);
    return true;
  } catch (e) {
    err(
      `Cannot reach MySQL at ${describeTarget(parseDatabaseUrl(config.db.url))} (${(e as { code?: string }).code ?? (e as Error).message}).\n`,
    );
    return false;
  }
}
