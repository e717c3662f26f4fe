import {
  CheckCalls,
  credentialsOf,
  refusedAccess,
  userAgentOf,
  type CheckOutcome,
  type CheckReading,
} from '../../src/providers/kit/check-calls.js';
import { optionVariable } from '../../src/providers/kit/options.js';
import type { ProviderCheck, ProviderCheckOffers, ProviderCheckSshKeys } from '../../src/providers/provider-check.js';
import { describeFailure, type LambdaClient } from './client.js';
import { EDGE_PAGE } from './errors.js';
import { LAMBDA_DROP_REASONS, offersFromInstanceTypes, type LambdaDropReason } from './offers.js';
import type { LambdaOptions } from './options.js';
import type { LambdaInstanceTypes } from './types.js';

const KEY = optionVariable('lambda', 'API_KEY');
const KEY_FIX = `set ${KEY} to a key from https://cloud.lambda.ai/api-keys`;

const MALFORMED = 'entries of a shape the plugin does not read: nothing to change here; report it if many';

/** What each drop reason means for the operator, or what to change. */
export const LAMBDA_DROP_HINTS: Readonly<Record<LambdaDropReason, string>> = {
  no_instance_type: MALFORMED,
  no_price: MALFORMED,
  no_region_name: MALFORMED,
  no_gpus: 'instance types without GPUs: nothing to change',
  no_capacity: 'instance types with capacity in no region now: nothing to change',
  region_not_configured: `regions ${optionVariable('lambda', 'REGIONS')} leaves out: add them to it to list their offers`,
};

/**
 * One GET of Lambda's API through its client, read by the one error table: `read` takes the
 * `data` of a success; an edge's page is told apart from the API's refusals.
 */
function get<T>(
  calls: CheckCalls,
  client: LambdaClient,
  path: string,
  read: (data: unknown) => CheckReading<T>,
): Promise<CheckOutcome<T>> {
  const queued = client.waitMs('api');
  return calls.timed(
    `GET /api/v1${path}`,
    async () => {
      const r = await client.call<unknown>('api', 'GET', path);
      if (r.ok) return { ...read(r.data), status: 200 };
      if (r.rule.match.text === EDGE_PAGE)
        return {
          ok: false,
          errorClass: 'user_agent',
          detail: `lambda GET ${path}: HTTP ${r.status} from the edge`,
          status: r.status,
        };
      const errorClass = r.rule.read === 'gone' ? 'request' : r.rule.read;
      if (errorClass !== 'auth')
        return {
          ok: false,
          errorClass,
          detail: `lambda GET ${path}: ${r.rule.note} (${describeFailure(r)})`,
          status: r.status,
        };
      // A refused key is the key to change; an inactive account or its billing address is the dashboard's.
      const keyRefused = r.status === 401 || r.code === 'global/invalid-api-key';
      return {
        ok: false,
        errorClass,
        detail: `${keyRefused ? 'the API key was refused' : r.rule.note} (HTTP ${r.status}${r.code ? ` ${r.code}` : ''})`,
        ...(keyRefused ? {} : { fix: `fix it in the Lambda Cloud dashboard (${r.rule.note})` }),
        status: r.status,
      };
    },
    queued,
  );
}

/** The instance types as offers, with the rule `listOffers` uses, each type or region left out counted by reason. */
export function countLambdaTypes(data: LambdaInstanceTypes, options: LambdaOptions): ProviderCheckOffers {
  const dropped: Record<string, number> = {};
  const offers = offersFromInstanceTypes(data, {
    regions: options.regions,
    maximumDurationSeconds: options.maximumDurationSeconds,
    onDrop: (reason) => (dropped[reason] = (dropped[reason] ?? 0) + 1),
  });
  const drops = Object.values(dropped).reduce((a, b) => a + b, 0);
  const hints = Object.fromEntries(LAMBDA_DROP_REASONS.filter((r) => dropped[r]).map((r) => [r, LAMBDA_DROP_HINTS[r]]));
  return { considered: offers.length + drops, parsed: offers.length, dropped, hints };
}

const isList = (data: unknown): CheckReading<number> =>
  Array.isArray(data)
    ? { ok: true, value: data.length, detail: `${data.length} listed` }
    : { ok: false, errorClass: 'bad_response', detail: 'data is not a list' };

/**
 * Lambda's check, read-only: the instance types (the key, and the offers counted by drop reason),
 * the account's SSH keys (a launch registers one per rental: listing them proves the key may
 * manage them, without registering anything) and the instance list the reconciler reads.
 * Lambda's API tells no balance.
 */
export async function checkLambda(client: LambdaClient, options: LambdaOptions): Promise<ProviderCheck> {
  const calls = new CheckCalls();
  const types = await get(calls, client, '/instance-types', (data): CheckReading<LambdaInstanceTypes> =>
    data && typeof data === 'object'
      ? { ok: true, value: data as LambdaInstanceTypes, detail: 'the key was accepted' }
      : { ok: false, errorClass: 'bad_response', detail: 'data is not an object' },
  );
  const refused = refusedAccess(types);
  const offers: ProviderCheckOffers = types.ok
    ? countLambdaTypes(types.value, options)
    : { considered: 0, parsed: 0, dropped: {}, hints: {}, detail: `not read: ${types.detail}` };
  let sshKeys: ProviderCheckSshKeys = { possible: false, detail: 'not checked: the key was not accepted' };
  if (!refused) {
    const keys = await get(calls, client, '/ssh-keys', isList);
    sshKeys = keys.ok
      ? {
          possible: true,
          detail: `the key may manage the account's SSH keys (${keys.value} registered); each rental registers one and deletes it after`,
        }
      : {
          possible: false,
          detail: `listing the account's SSH keys failed: ${keys.detail}`,
          fix: keys.errorClass === 'auth' ? KEY_FIX : 'run the check again; a launch registers a key the same way',
        };
    await get(calls, client, '/instances', isList);
  }
  return {
    calls: calls.calls,
    credentials: credentialsOf(types, KEY_FIX),
    offers,
    sshKeys,
    userAgent: userAgentOf(calls.calls),
  };
}
