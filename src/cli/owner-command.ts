import { parseArgs } from 'node:util';
import { systemClock } from '../clock.js';
import type { Config } from '../config.js';
import { createDatabaseIfMissing, createDataSource, describeTarget, migrate, parseDatabaseUrl } from '../db/data-source.js';
import { RateLimiter } from '../http/rate-limiter.js';
import { AccountsService, type NewOwner } from '../modules/accounts/accounts.service.js';
import { APPROVAL_LIMITS, KEY_LIMIT_MAXIMUMS, OWNER_KEY_LIMITS } from '../modules/keys/key-limits.js';
import { normalizeEmail } from '../modules/accounts/email.js';
import { ALL_SCOPES, type Scope } from '../modules/keys/api-key.entity.js';
import { KeysService } from '../modules/keys/keys.service.js';

export const OWNER_USAGE = `Usage: owner create --name <name> [options]

Creates an owner account and its first OWNER key, and prints the key once.

Options:
  --name <text>                   name of the owner key (1-100 characters), e.g. the owner's name
  --email <address>               the account's e-mail (receipts of card checkouts)
  --scopes <list>                 comma-separated subset of read,rent,manage,billing (default: all four)
  --max-per-rental-minor <cents>  the key's per-rental cap (default ${OWNER_KEY_LIMITS.maxPerRentalMinor})
  --budget-limit-minor <cents>    the key's lifetime spending cap (default ${OWNER_KEY_LIMITS.budgetLimitMinor})
  --max-concurrent <n>            the key's concurrent deployments (default ${OWNER_KEY_LIMITS.maxConcurrentDeployments})
  --admin                         the key may also open the operator pages (jobs dashboard)
  --json                          print {"accountId","keyId","token"} as JSON instead of text

Run it on the server: node dist/src/main.js owner create --name "Ada" (or npm run owner -- create --name "Ada").`;

/** A usage mistake: printed with the usage text, exit status 2. */
export class UsageError extends Error {}

/** The operator's request, validated: what AccountsService.createOwner takes, plus the output form. */
export function parseOwnerCreate(argv: string[]): NewOwner & { json: boolean } {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        name: { type: 'string' },
        email: { type: 'string' },
        scopes: { type: 'string' },
        'max-per-rental-minor': { type: 'string' },
        'budget-limit-minor': { type: 'string' },
        'max-concurrent': { type: 'string' },
        admin: { type: 'boolean', default: false },
        json: { type: 'boolean', default: false },
      },
    });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const v = parsed.values;
  const name = v.name?.trim() ?? '';
  if (name.length < 1 || name.length > 100) throw new UsageError('--name is required: 1 to 100 characters.');
  let email: string | null = null;
  if (v.email !== undefined) {
    email = normalizeEmail(v.email);
    if (email === null) throw new UsageError(`--email must be an e-mail address, got "${v.email}".`);
  }
  const scopes = v.scopes === undefined ? [...ALL_SCOPES] : [...new Set(v.scopes.split(',').map((s) => s.trim()).filter(Boolean))];
  const unknown = scopes.filter((s) => !ALL_SCOPES.includes(s as Scope));
  if (scopes.length === 0 || unknown.length) throw new UsageError(`--scopes must be a comma-separated subset of ${ALL_SCOPES.join(',')}${unknown.length ? `; unknown: ${unknown.join(', ')}` : ''}.`);
  const limit = (flag: string, raw: string | undefined, field: keyof typeof OWNER_KEY_LIMITS): number => {
    if (raw === undefined) return OWNER_KEY_LIMITS[field];
    const n = /^\d{1,15}$/.test(raw.trim()) ? Number(raw.trim()) : NaN;
    // The same bounds an approval uses: an owner key below them could not approve any agent.
    if (!(n >= APPROVAL_LIMITS.minimums[field] && n <= KEY_LIMIT_MAXIMUMS[field])) {
      throw new UsageError(`${flag} must be a whole number from ${APPROVAL_LIMITS.minimums[field]} to ${KEY_LIMIT_MAXIMUMS[field]}, got "${raw}".`);
    }
    return n;
  };
  return {
    name,
    email,
    scopes: scopes as Scope[],
    isAdmin: v.admin ?? false,
    maxPerRentalMinor: limit('--max-per-rental-minor', v['max-per-rental-minor'], 'maxPerRentalMinor'),
    budgetLimitMinor: limit('--budget-limit-minor', v['budget-limit-minor'], 'budgetLimitMinor'),
    maxConcurrentDeployments: limit('--max-concurrent', v['max-concurrent'], 'maxConcurrentDeployments'),
    json: v.json ?? false,
  };
}

export interface CommandIo {
  out: (text: string) => void;
  err: (text: string) => void;
}

/**
 * `owner <subcommand>` from the server's shell. Returns the exit status. The token goes to
 * standard output once and nowhere else: it is never logged.
 */
export async function runOwnerCommand(argv: string[], config: Config, io: CommandIo): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === undefined || sub === 'help' || sub === '--help' || sub === '-h') {
    io.out(`${OWNER_USAGE}\n`);
    return sub === undefined ? 2 : 0;
  }
  if (sub !== 'create') {
    io.err(`Unknown owner command "${sub}".\n\n${OWNER_USAGE}\n`);
    return 2;
  }
  let input: ReturnType<typeof parseOwnerCreate>;
  try {
    input = parseOwnerCreate(rest);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.err(`${err.message}\n\n${OWNER_USAGE}\n`);
    return 2;
  }
  try {
    await createDatabaseIfMissing(config.databaseUrl);
  } catch (err) {
    io.err(`Cannot reach MySQL at ${describeTarget(parseDatabaseUrl(config.databaseUrl))} (${(err as { code?: string }).code ?? (err as Error).message}).\n`);
    return 1;
  }
  const ds = createDataSource(config.databaseUrl, 2);
  await ds.initialize();
  try {
    await migrate(ds);
    const keys = new KeysService(ds, systemClock);
    const accounts = new AccountsService(ds, systemClock, keys, new RateLimiter(ds, systemClock), {
      agentV1Enabled: config.agentV1Enabled,
      signupRatePerMinute: config.signupRatePerMinute,
      defaultBillingModel: config.defaultBillingModel,
    });
    const { json, ...owner } = input;
    const { account, key, token } = await accounts.createOwner(owner);
    if (json) {
      io.out(`${JSON.stringify({ accountId: account.id, keyId: key.id, token })}\n`);
    } else {
      io.out(
        [
          `Owner account ${account.id} created${account.email ? ` (${account.email})` : ''}.`,
          `OWNER key "${key.name}" (prefix ${key.prefix}): scopes ${key.scopes.join(', ')}; ` +
            `${key.maxPerRentalMinor} cents per rental, ${key.budgetLimitMinor} cents in total, ${key.maxConcurrentDeployments} at a time${key.isAdmin ? '; admin' : ''}.`,
          '',
          'The key, shown this once (it cannot be recovered, only revoked and replaced):',
          token,
          '',
          `Use it as "Authorization: Bearer <key>", e.g. to approve an agent at its approval page or with POST ${config.publicBaseUrl}/api/v1/agent-authorizations/approve.`,
          '',
        ].join('\n'),
      );
    }
    return 0;
  } finally {
    await ds.destroy();
  }
}
