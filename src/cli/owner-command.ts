import { parseArgs } from 'node:util';
import { systemClock } from '../clock.js';
import type { Config } from '../config.js';
import { normaliseId } from '../ids.js';
import { RateLimiter } from '../http/rate-limiter.js';
import { AccountsService, type NewOwner } from '../modules/accounts/accounts.service.js';
import {
  amountWithin,
  IDLE_TERMINATE_MINUTES,
  idleTerminateMinutesProblem,
  MAX_RENTAL_SECONDS,
  maxRentalSecondsProblem,
  OWNER_KEY_BOUNDS,
  OWNER_KEY_LIMITS,
  type KeyAmounts,
} from '../modules/keys/key-limits.js';
import { normalizeEmail } from '../modules/accounts/email.js';
import { ALL_SCOPES, type Scope } from '../modules/keys/api-key.entity.js';
import { KeysService } from '../modules/keys/keys.service.js';
import { keyName } from '../modules/keys/key-name.js';
import { AgentKeysService } from '../modules/agents/agent-keys.service.js';
import { AppError } from '../errors/app-error.js';
import { SecretBox } from '../modules/credentials/secret-box.js';
import { resealSecrets } from '../modules/credentials/reseal-secrets.js';
import { openStore, type AppStore } from '../repositories.js';
import { reachDatabase } from './database-reach.js';

export const OWNER_USAGE = `Usage: owner create --name <name> [options]
       owner keys --account <account id> [--json]
       owner revoke-key --key <key id> [--json]
       owner reseal-secrets [--json]
       owner providers <drift|check|canary> ...  (the clouds: owner providers help)

create: creates an owner account and its first OWNER key, and prints the key once.
keys: lists the account's OWNER keys (id, prefix, name, scopes, revoked or not).
revoke-key: revokes an OWNER key at once, with every agent key it issued, every key obtained
  through an agent authorization it approved, and every approved authorization not yet
  exchanged. Running rentals keep running.
reseal-secrets: after a SECRETS_KEY rotation, seals every stored secret again under SECRETS_KEY,
  opening each with the key of SECRETS_KEY_PREVIOUS that sealed it, and prints how many secrets
  each key id still holds. Safe to run while the service runs, and to run again.

Options of create:
  --name <text>                   name of the owner key (1-100 characters), e.g. the owner's name
  --email <address>               the account's e-mail (receipts of card checkouts)
  --scopes <list>                 comma-separated subset of read,rent,manage,billing (default: all four)
  --max-per-rental-minor <cents>  the key's per-rental cap (default ${OWNER_KEY_LIMITS.maxPerRentalMinor})
  --budget-limit-minor <cents>    the key's lifetime spending cap (default ${OWNER_KEY_LIMITS.budgetLimitMinor})
  --max-concurrent <n>            the key's concurrent deployments (default ${OWNER_KEY_LIMITS.maxConcurrentDeployments})
  --max-rental-seconds <s>        the longest any rental of the key may run, ${MAX_RENTAL_SECONDS.minimum} to ${MAX_RENTAL_SECONDS.maximum}
                                  (default: no limit); agent keys it issues or approves get one no longer
  --idle-terminate-minutes <m>    minutes a rental of the key may keep every GPU idle before it is warned,
                                  then ended, ${IDLE_TERMINATE_MINUTES.minimum} to ${IDLE_TERMINATE_MINUTES.maximum} (default: never); agent keys set their own
  --admin                         the key may also open the operator pages (jobs dashboard) and
                                  GET /api/v1/providers/check
  --json                          print {"accountId","keyId","token"} as JSON instead of text
                                  (keys: the list; revoke-key: what was revoked)

Run it on the server: node dist/src/main.js owner create --name "Ada" (or npm run owner -- create --name "Ada").
With --json through npm, add --silent so npm's banner stays off stdout:
  npm run --silent owner -- create --name ci --json | jq -r .token`;

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
        'max-rental-seconds': { type: 'string' },
        'idle-terminate-minutes': { type: 'string' },
        admin: { type: 'boolean', default: false },
        json: { type: 'boolean', default: false },
      },
    });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const v = parsed.values;
  if (v.name === undefined) throw new UsageError('--name is required: 1 to 100 characters.');
  let name: string;
  try {
    name = keyName(v.name, '--name');
  } catch (err) {
    if (err instanceof AppError) throw new UsageError(err.message.replace(/^Invalid request: /, ''));
    throw err;
  }
  let email: string | null = null;
  if (v.email !== undefined) {
    email = normalizeEmail(v.email);
    if (email === null) throw new UsageError(`--email must be an e-mail address, got "${v.email}".`);
  }
  const scopes =
    v.scopes === undefined
      ? [...ALL_SCOPES]
      : [
          ...new Set(
            v.scopes
              .split(',')
              .map((s) => s.trim())
              .filter(Boolean),
          ),
        ];
  const unknown = scopes.filter((s) => !ALL_SCOPES.includes(s as Scope));
  if (scopes.length === 0 || unknown.length)
    throw new UsageError(
      `--scopes must be a comma-separated subset of ${ALL_SCOPES.join(',')}${unknown.length ? `; unknown: ${unknown.join(', ')}` : ''}.`,
    );
  const wholeNumber = (raw: string) => (/^\d{1,15}$/.test(raw.trim()) ? Number(raw.trim()) : NaN);
  const outOfRange = (flag: string, raw: string, range: { minimum: number; maximum: number }) =>
    new UsageError(`${flag} must be a whole number from ${range.minimum} to ${range.maximum}, got "${raw}".`);
  const amount = (flag: string, raw: string | undefined, field: keyof KeyAmounts): number => {
    if (raw === undefined) return OWNER_KEY_LIMITS[field];
    const n = wholeNumber(raw);
    if (!amountWithin(field, n, OWNER_KEY_BOUNDS))
      throw outOfRange(flag, raw, {
        minimum: OWNER_KEY_BOUNDS.minimums[field],
        maximum: OWNER_KEY_BOUNDS.maximums[field],
      });
    return n;
  };
  const optional = (
    flag: string,
    raw: string | undefined,
    problem: (value: number) => string | null,
    range: { minimum: number; maximum: number },
  ): number | null => {
    if (raw === undefined) return null;
    const n = wholeNumber(raw);
    if (problem(n)) throw outOfRange(flag, raw, range);
    return n;
  };
  const maxRentalSeconds = optional(
    '--max-rental-seconds',
    v['max-rental-seconds'],
    maxRentalSecondsProblem,
    MAX_RENTAL_SECONDS,
  );
  const idleTerminateMinutes = optional(
    '--idle-terminate-minutes',
    v['idle-terminate-minutes'],
    idleTerminateMinutesProblem,
    IDLE_TERMINATE_MINUTES,
  );
  return {
    name,
    email,
    scopes: scopes as Scope[],
    isAdmin: v.admin ?? false,
    maxPerRentalMinor: amount('--max-per-rental-minor', v['max-per-rental-minor'], 'maxPerRentalMinor'),
    budgetLimitMinor: amount('--budget-limit-minor', v['budget-limit-minor'], 'budgetLimitMinor'),
    maxConcurrentDeployments: amount('--max-concurrent', v['max-concurrent'], 'maxConcurrentDeployments'),
    maxRentalSeconds,
    idleTerminateMinutes,
    json: v.json ?? false,
  };
}

export interface CommandIo {
  out: (text: string) => void;
  err: (text: string) => void;
}

/** `owner keys` and `owner revoke-key`: the one id they act on, and the output form. */
export function parseOwnerKeyCommand(sub: 'keys' | 'revoke-key', argv: string[]): { id: string; json: boolean } {
  const flag = sub === 'keys' ? 'account' : 'key';
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: { [flag]: { type: 'string' }, json: { type: 'boolean', default: false } },
    });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const id = normaliseId(String(parsed.values[flag] ?? '').trim());
  if (id === null)
    throw new UsageError(`--${flag} is required: the ${flag === 'account' ? 'account' : 'key'} id (a UUID).`);
  return { id, json: Boolean(parsed.values.json) };
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
  // The `owner providers <sub>` family (drift, check, canary) has its own file and usage text.
  if (sub === 'providers') return (await import('./owner-providers.js')).runOwnerProviders(rest, config, io);
  if (sub !== 'create' && sub !== 'keys' && sub !== 'revoke-key' && sub !== 'reseal-secrets') {
    io.err(`Unknown owner command "${sub}".\n\n${OWNER_USAGE}\n`);
    return 2;
  }
  let input:
    | ReturnType<typeof parseOwnerCreate>
    | ReturnType<typeof parseOwnerKeyCommand>
    | ReturnType<typeof parseResealSecrets>;
  try {
    input =
      sub === 'create'
        ? parseOwnerCreate(rest)
        : sub === 'reseal-secrets'
          ? parseResealSecrets(rest)
          : parseOwnerKeyCommand(sub, rest);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.err(`${err.message}\n\n${OWNER_USAGE}\n`);
    return 2;
  }
  if (!(await reachDatabase(config, io.err))) return 1;
  const { store, close } = await openStore(config.db.url, 2);
  try {
    if ('reseal' in input) return await resealStoredSecrets(store, config, input.json, io);
    const keys = new KeysService(store, systemClock);
    const limiter = new RateLimiter(store, systemClock);
    if ('id' in input) {
      const agentKeys = new AgentKeysService(store, systemClock, keys, (accountId, keyIds) =>
        store.read((r) => r.rentals.reads.unfinishedOfKeys(accountId, keyIds)),
      );
      return sub === 'keys'
        ? await listOwnerKeys(agentKeys, input, io)
        : await revokeOwnerKey(store, agentKeys, input, io);
    }
    const accounts = new AccountsService(store, systemClock, keys, limiter, {
      agentV1Enabled: config.agents.v1Enabled,
      signupRatePerMinute: config.signup.ratePerMinute,
      defaultBillingModel: config.billing.defaultModel,
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
            `${key.maxPerRentalMinor} cents per rental, ${key.budgetLimitMinor} cents in total, ${key.maxConcurrentDeployments} at a time` +
            `${key.maxRentalSeconds === null ? '' : `, rentals up to ${key.maxRentalSeconds} seconds`}` +
            `${key.idleTerminateMinutes === null ? '' : `, rentals ended after ${key.idleTerminateMinutes} idle minutes`}${key.isAdmin ? '; admin' : ''}.`,
          '',
          'The key, shown this once (it cannot be recovered, only revoked and replaced):',
          token,
          '',
          `Use it as "Authorization: Bearer <key>", e.g. to approve an agent at its approval page or with POST ${config.http.publicBaseUrl}/api/v1/agent-authorizations/approve.`,
          '',
        ].join('\n'),
      );
    }
    return 0;
  } finally {
    await close();
  }
}

/** `reseal-secrets [--json]`. */
function parseResealSecrets(argv: string[]): { reseal: true; json: boolean } {
  try {
    const parsed = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: { json: { type: 'boolean', default: false } },
    });
    return { reseal: true, json: Boolean(parsed.values.json) };
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

async function resealStoredSecrets(store: AppStore, config: Config, json: boolean, io: CommandIo): Promise<number> {
  const box = SecretBox.fromConfig(config);
  let outcomes;
  try {
    outcomes = await resealSecrets(store, box);
  } catch (err) {
    io.err(`${(err as Error).message}\n`);
    return 1;
  }
  const left = outcomes.reduce(
    (n, o) =>
      n +
      Object.entries(o.byKey)
        .filter(([id]) => !box.isCurrent(id))
        .reduce((m, [, c]) => m + c, 0),
    0,
  );
  if (json) {
    io.out(`${JSON.stringify({ keyId: box.currentKeyId, kinds: outcomes, underOtherKeys: left })}\n`);
    return left === 0 ? 0 : 1;
  }
  for (const o of outcomes) {
    const held =
      Object.entries(o.byKey)
        .map(([id, n]) => `${id}: ${n}`)
        .join(', ') || 'none stored';
    io.out(
      `${o.kind}: ${o.resealed} resealed under ${box.currentKeyId}${o.skipped ? `, ${o.skipped} changed meanwhile (run again)` : ''}; by key now ${held}.\n`,
    );
  }
  io.out(
    left === 0
      ? `Every stored secret is sealed under ${box.currentKeyId}: the old keys may leave SECRETS_KEY_PREVIOUS once every process runs with this SECRETS_KEY.\n`
      : `${left} secret(s) are still under other keys: run this again once every process runs with SECRETS_KEY_ID=${box.currentKeyId}.\n`,
  );
  return left === 0 ? 0 : 1;
}

async function listOwnerKeys(
  agentKeys: AgentKeysService,
  input: { id: string; json: boolean },
  io: CommandIo,
): Promise<number> {
  const keys = await agentKeys.listOwnerKeys(input.id);
  if (input.json) {
    io.out(`${JSON.stringify(keys)}\n`);
    return 0;
  }
  if (keys.length === 0) {
    io.out(`Account ${input.id} has no OWNER keys.\n`);
    return 0;
  }
  for (const k of keys) {
    io.out(
      `${k.id}  ${k.prefix}  ${k.revokedAt ? `revoked ${k.revokedAt}` : 'active'}  ${k.scopes.join(',')}  "${k.name}"\n`,
    );
  }
  return 0;
}

async function revokeOwnerKey(
  store: AppStore,
  agentKeys: AgentKeysService,
  input: { id: string; json: boolean },
  io: CommandIo,
): Promise<number> {
  const key = await store.read((r) => r.accounts.keys.ownerKey(input.id));
  if (!key) {
    io.err(`No OWNER key has id ${input.id}.\n`);
    return 1;
  }
  const revoked = await agentKeys.revokeOwnerKey(key.accountId, key.id);
  if (input.json) {
    io.out(`${JSON.stringify({ accountId: key.accountId, ...revoked })}\n`);
    return 0;
  }
  io.out(
    [
      `OWNER key ${revoked.id} (prefix ${key.prefix}) of account ${key.accountId} revoked at ${revoked.revokedAt}.`,
      `Revoked with it: ${revoked.revokedAgentKeyIds.length} agent key(s), ${revoked.revokedAuthorizationIds.length} approved authorization(s) not yet exchanged.`,
      'Rentals already running keep running; terminate them separately if they must stop.',
      '',
    ].join('\n'),
  );
  return 0;
}
