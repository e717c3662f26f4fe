import { parseArgs } from 'node:util';
import type { Config } from '../config.js';
import type { DriftRecord } from '../modules/inventory/provider-drift.repository.js';
import { compactShape, MAX_DRIFT_SHAPES_PER_PROVIDER } from '../providers/kit/drift.js';
import { openStore, type AppStore } from '../repositories.js';
import { CANARY_ABOUT, CANARY_SYNOPSIS, runCanaryCommand } from './owner-canary.js';
import { CHECK_ABOUT, CHECK_SYNOPSIS, runProvidersCheck } from './owner-providers-check.js';
import { reachDatabase } from './database-reach.js';

/**
 * Where a subcommand writes: the owner command's `CommandIo`, by shape (this file may not import
 * `owner-command.ts`, which dispatches to it).
 */
export interface ProvidersIo {
  out: (text: string) => void;
  err: (text: string) => void;
}

/** One `owner providers <name>` subcommand: its usage and what it runs (the exit status). */
export interface ProvidersSubcommand {
  /** The arguments after `owner providers`: `drift [--json]`. */
  synopsis: string;
  /** What it does, a few lines for the usage text. */
  about: string;
  run(argv: string[], config: Config, io: ProvidersIo): Promise<number>;
}

/** A usage mistake in a subcommand's arguments: printed with the usage text, exit status 2. */
export class ProvidersUsageError extends Error {}

/** What `parse` returns (a `node:util` `parseArgs` call); what it throws is a {@link ProvidersUsageError}. */
export function parsedArgs<T>(parse: () => T): T {
  try {
    return parse();
  } catch (err) {
    throw new ProvidersUsageError((err as Error).message);
  }
}

/**
 * Opens the service's database (migrated, as every process does) for one subcommand and hands `fn`
 * its store, closing it after; a database out of reach is one line and exit status 1.
 */
export async function withProvidersStore(
  config: Config,
  io: ProvidersIo,
  fn: (store: AppStore) => Promise<number>,
): Promise<number> {
  if (!(await reachDatabase(config, io.err))) return 1;
  const { store, close } = await openStore(config.db.url, 2);
  try {
    return await fn(store);
  } finally {
    await close();
  }
}

/** A drift record as `--json` prints it: the stored shape as an object, times as ISO text. */
function driftJson(r: DriftRecord) {
  return {
    provider: r.provider,
    kind: r.kind,
    where: r.where,
    seen: r.seen,
    firstSeenAt: r.firstSeenAt.toISOString(),
    lastSeenAt: r.lastSeenAt.toISOString(),
    shape: r.shape,
  };
}

/** `owner providers drift [--provider <id>] [--json]`: the drift report, one line per shape. */
export const DRIFT_SUBCOMMAND: ProvidersSubcommand = {
  synopsis: 'drift [--provider <id>] [--json]',
  about: `every answer a provider plugin could not fully read (an unknown instance state, field
  shape, error body or page shape), once per shape, with how often and when it was seen, one line
  each. A shape holds keys and value types only (and an unknown state's name, an error's status and
  code): attach the --json list to a bug report. At most ${MAX_DRIFT_SHAPES_PER_PROVIDER} shapes are kept per provider.`,
  async run(argv, config, io) {
    const { values: v } = parsedArgs(() =>
      parseArgs({
        args: argv,
        strict: true,
        allowPositionals: false,
        options: { provider: { type: 'string' }, json: { type: 'boolean', default: false } },
      }),
    );
    const provider = typeof v.provider === 'string' ? v.provider.trim() : undefined;
    return withProvidersStore(config, io, async (store) => {
      const records = await store.read((r) => r.providerDrift.list(provider || undefined));
      if (v.json) {
        io.out(`${JSON.stringify(records.map(driftJson))}\n`);
        return 0;
      }
      if (records.length === 0) {
        io.out(`No drift recorded${provider ? ` for ${provider}` : ''}: every answer was one its plugin reads.\n`);
        return 0;
      }
      for (const r of records)
        io.out(
          `${r.provider}  ${r.kind}  ${r.where}  seen ${r.seen}  first ${r.firstSeenAt.toISOString()}  last ${r.lastSeenAt.toISOString()}  ${compactShape(r.shape)}\n`,
        );
      return 0;
    });
  },
};

/** Every `owner providers` subcommand, by name: a new one (`check`, `canary`) is one entry here. */
export const PROVIDERS_SUBCOMMANDS: Readonly<Record<string, ProvidersSubcommand>> = {
  drift: DRIFT_SUBCOMMAND,
  check: { synopsis: CHECK_SYNOPSIS, about: CHECK_ABOUT, run: runProvidersCheck },
  canary: { synopsis: CANARY_SYNOPSIS, about: CANARY_ABOUT, run: runCanaryCommand },
};

/** The usage text of the family, from each subcommand's own. */
export function providersUsage(): string {
  const entries = Object.entries(PROVIDERS_SUBCOMMANDS);
  const lines = entries.map(([, s], i) => `${i === 0 ? 'Usage: ' : '       '}owner providers ${s.synopsis}`);
  const about = entries.map(([name, s]) => `${name}: ${s.about}`);
  return [...lines, '', ...about].join('\n');
}

/**
 * `owner providers <subcommand>` from the server's shell (dispatched by `runOwnerCommand`).
 * Returns the exit status: 2 for a usage mistake, else the subcommand's.
 */
export async function runOwnerProviders(argv: string[], config: Config, io: ProvidersIo): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === undefined || sub === 'help' || sub === '--help' || sub === '-h') {
    io.out(`${providersUsage()}\n`);
    return sub === undefined ? 2 : 0;
  }
  const command = Object.hasOwn(PROVIDERS_SUBCOMMANDS, sub) ? PROVIDERS_SUBCOMMANDS[sub] : undefined;
  if (!command) {
    io.err(`Unknown owner providers command "${sub}".\n\n${providersUsage()}\n`);
    return 2;
  }
  try {
    return await command.run(rest, config, io);
  } catch (err) {
    if (!(err instanceof ProvidersUsageError)) throw err;
    io.err(`${err.message}\n\n${providersUsage()}\n`);
    return 2;
  }
}
