import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

/*
 * The store seam (src/db/store.ts): services reach the database only through repositories, and
 * each table belongs to one aggregate, whose repositories are the only files that name it.
 */

const ROOT = join(fileURLToPath(import.meta.url), '../../..');

function sources(...dirs: string[]): { path: string; text: string }[] {
  return dirs.flatMap((dir) =>
    readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
      .filter((e) => e.isFile() && e.name.endsWith('.ts'))
      .map((e) => relative(ROOT, join(e.parentPath, e.name)))
      .filter((path) => !path.startsWith('src/generated/'))
      .map((path) => ({ path, text: readFileSync(join(ROOT, path), 'utf8') })),
  );
}

/** The store layer: the database layer, the repositories and entities, and the composition root that binds them. */
const inStoreLayer = (path: string) =>
  path.startsWith('src/db/') ||
  path.endsWith('.repository.ts') ||
  path.endsWith('.entity.ts') ||
  ['src/repositories.ts', 'src/entities.ts'].includes(path);

/**
 * Files outside the store layer that still import typeorm, each for a reason that is not the
 * seam's: the process entry points that open and close the DataSource, the job system's MySQL
 * backend (its own storage layer) and the local plugin's instance table (plugins get a DataSource
 * from the kit). The migration list below shrinks to nothing as aggregates move onto the store.
 */
const OWN_STORAGE = new Set([
  'src/container.ts',
  'src/main.ts',
  'src/worker.ts',
  'src/jobs/agenda.ts',
  'src/jobs/mysql-backend.ts',
  'src/providers/provider.ts',
  'plugins/local/local-instance-store.ts',
  'plugins/local/uid-claims.ts',
]);

/**
 * Still on the DataSource: the services of the aggregates not yet moved onto the store. The seam is
 * done when this list is empty; a file may leave it, never join it.
 */
const NOT_YET_ON_THE_STORE = new Set<string>([]);

const importsTypeorm = (text: string) => /^\s*import\b[^;]*?\bfrom\s+'typeorm(?:\/[^']*)?'/m.test(text);

const repositoryOf = (...dirs: string[]) => new RegExp(`^(?:${dirs.join('|')})/[^/]+\\.(?:repository|entity)\\.ts$`);
const ACCOUNTS = repositoryOf('src/modules/accounts', 'src/modules/keys', 'src/modules/agents');
const RENTALS = repositoryOf('src/modules/rentals/store', 'src/modules/rentals/state');
const LEDGER = /^src\/modules\/billing\/ledger[-.]/;
const CHECKOUTS = /^src\/modules\/billing\/(?:checkouts?|payment-events?)[-.]/;
const INVENTORY = repositoryOf('src/modules/inventory');
const EVENTS = repositoryOf('src/modules/events');
const WEBHOOKS = repositoryOf('src/modules/webhooks');
const TELEGRAM = repositoryOf('src/modules/telegram', 'src/modules/notifications');

/** Each table, and the files of the aggregate that owns it: the only ones that may name it. */
const OWNERS: Record<string, RegExp> = {
  accounts: ACCOUNTS,
  api_keys: ACCOUNTS,
  agent_authorizations: ACCOUNTS,
  rate_limit_counters: /^src\/http\/rate-limits\.repository\.ts$/,
  orders: RENTALS,
  deployments: RENTALS,
  deployment_attempts: RENTALS,
  idle_watches: RENTALS,
  credential_reveals: repositoryOf('src/modules/credentials'),
  ledger_entries: LEDGER,
  checkouts: CHECKOUTS,
  payment_events: CHECKOUTS,
  offers: INVENTORY,
  provider_status: INVENTORY,
  provider_drift: /^src\/modules\/inventory\/provider-drift\.repository\.ts$/,
  oauth_records: /^src\/modules\/oauth\/oauth-records\.repository\.ts$/,
  inventory_state: INVENTORY,
  events: EVENTS,
  event_sequences: EVENTS,
  event_cursors: EVENTS,
  // Kept by the migrations for a rolling upgrade; no code names them any more.
  webhook_cursor: WEBHOOKS,
  telegram_cursors: TELEGRAM,
  webhook_endpoints: WEBHOOKS,
  webhook_deliveries: WEBHOOKS,
  webhook_delivery_attempts: WEBHOOKS,
  webhook_delivery_slots: WEBHOOKS,
  idempotency_records: repositoryOf('src/modules/idempotency'),
  telegram_conversations: TELEGRAM,
  telegram_notifications: TELEGRAM,
  telegram_notify_prefs: TELEGRAM,
  receipt_signing_keys: repositoryOf('src/modules/receipts'),
  teardown_receipts: repositoryOf('src/modules/receipts'),
  agenda_jobs: /^src\/jobs\/[^/]+\.repository\.ts$/,
  local_provider_instances: /^plugins\/local\/local-instance-store\.ts$/,
};

/** Tables named outside their aggregate today, as `table: file`; each must go (the list may only shrink). */
const CROSSINGS = new Set<string>([]);

/** The tables a source names in SQL (FROM, JOIN, INTO, UPDATE, DELETE FROM, TABLE) or as an entity's table. */
function tablesNamed(text: string, tables: readonly string[]): string[] {
  return tables.filter(
    (t) =>
      new RegExp(`\\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\\s+\`?${t}\\b`, 'i').test(text) ||
      new RegExp(`name:\\s*'${t}'`).test(text),
  );
}

describe('the store seam', () => {
  it('imports typeorm only in the store layer', () => {
    assert.ok(importsTypeorm(`import type { DataSource } from 'typeorm';`));
    assert.ok(importsTypeorm(`import { MysqlDriver } from 'typeorm/driver/mysql/MysqlDriver.js';`));
    assert.ok(!importsTypeorm(`// see typeorm's docs`));
    const outside = sources('src', 'bot', 'plugins')
      .filter((f) => !inStoreLayer(f.path) && !OWN_STORAGE.has(f.path) && importsTypeorm(f.text))
      .map((f) => f.path)
      .sort();
    assert.deepEqual(outside, [...NOT_YET_ON_THE_STORE].sort());
  });

  it('names each table only in the repositories of the aggregate that owns it', () => {
    assert.deepEqual(tablesNamed('SELECT a FROM orders o JOIN `api_keys` k ON', ['orders', 'api_keys', 'x']), [
      'orders',
      'api_keys',
    ]);
    assert.deepEqual(tablesNamed(`@Entity({ name: 'offers' })`, ['offers']), ['offers']);
    const tables = Object.keys(OWNERS);
    const found = new Set<string>();
    for (const f of sources('src', 'bot', 'plugins')) {
      for (const t of tablesNamed(f.text, tables)) if (!OWNERS[t].test(f.path)) found.add(`${t}: ${f.path}`);
    }
    assert.deepEqual([...found].sort(), [...CROSSINGS].sort());
  });

  it('knows every table the migrations create', () => {
    const created = new Set(
      sources('migrations').flatMap((f) =>
        [...f.text.matchAll(/CREATE TABLE (?:IF NOT EXISTS )?`?([a-z_]+)/g)].map((m) => m[1]),
      ),
    );
    assert.deepEqual([...created].sort(), Object.keys(OWNERS).sort());
  });
});
