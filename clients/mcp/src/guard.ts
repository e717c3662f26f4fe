import {
  GprApiError,
  GprNetworkError,
  GprRentalStateError,
  GprTimeoutError,
  GprUnsafeValueError,
  budgetFloorNext,
  failureNext,
  notActiveNext,
  notFoundNext,
  rentalRefusalNext,
} from '@gpu-rental/sdk';
import type { CallToolResult } from '@modelcontextprotocol/server';

/** PEM / OpenSSH / PuTTY private keys and this service's own API tokens. */
const SECRET_SHAPES = [
  /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----/,
  /PuTTY-User-Key-File-/,
  /\bgpr_[A-Za-z0-9]{8}\.[A-Za-z0-9_-]{20,}/,
];

/** True when any string in the arguments looks like a private key or an API token. */
export function containsSecret(value: unknown): boolean {
  if (typeof value === 'string') return SECRET_SHAPES.some((re) => re.test(value));
  if (Array.isArray(value)) return value.some(containsSecret);
  if (value && typeof value === 'object') return Object.values(value).some(containsSecret);
  return false;
}

export function refusal(text: string): CallToolResult {
  return { isError: true, content: [{ type: 'text', text }] };
}

/**
 * What a guarded tool does. A server started without GPR_MCP_ALLOW_SPEND=1 refuses all three:
 * a model that may not spend may not destroy a machine or open SSH access to one either.
 */
export type Guarded = 'spends' | 'destroys' | 'reveals';

const GUARDED: Record<Guarded, { does: string; instead: string }> = {
  spends: { does: 'spends money', instead: 'ask a human to do this step with the gpr command line' },
  destroys: {
    does: 'destroys a machine',
    instead: 'ask a human to run `gpr terminate <rentalId> --wait` (charges run until the machine is terminated)',
  },
  reveals: { does: 'opens SSH access to a machine', instead: 'ask a human to connect with `gpr ssh <rentalId>`' },
};

/** The refusal of a guarded tool on a read-only server: why, and what the model can do instead. */
export function guardRefusal(tool: string, what: Guarded): CallToolResult {
  const g = GUARDED[what];
  return refusal(
    `REFUSED: ${tool} ${g.does} and this server is read-only. Nothing was done. ` +
      `Next: ${g.instead}, or ask them to restart this MCP server with GPR_MCP_ALLOW_SPEND=1 (allows spending, terminating and SSH access). Do not retry this call until then.`,
  );
}

/**
 * includePrivateKey on a server without GPR_MCP_ALLOW_SECRETS=1. `savesKeyFiles`: whether this
 * server saves the key to a file itself (stdio), which the model can use instead.
 */
export const keyRefusal = (savesKeyFiles = true): CallToolResult =>
  refusal(
    savesKeyFiles
      ? 'REFUSED: includePrivateKey needs a server started with GPR_MCP_ALLOW_SECRETS=1, so the private key stays out of the conversation. Nothing was revealed. ' +
          'Next: call reveal_ssh_credentials without includePrivateKey and use keyFile (a 0600 file) and sshCommand.'
      : 'REFUSED: this connection does not pass private keys into the conversation, and it has no disk to save one on. Nothing was revealed. ' +
          'Next: ask a human to connect with `gpr ssh <rentalId>`.',
  );

/** A result that carries a private key or a token where none was asked for. */
export const secretOutputRefusal = (): CallToolResult =>
  refusal(
    'WITHHELD: the result held a private key or an API token, which this server does not pass to the model. Nothing was shown.',
  );

const NEXT: Record<string, string> = {
  UNAUTHENTICATED:
    'The API token was refused. If it worked before, it was revoked: ask the account owner for a new key or a setup code, set it as GPR_TOKEN and restart this server. Without any key, call signup (a new, unfunded account of its own).',
  INSUFFICIENT_CREDITS: 'Not enough credits: call create_topup_link and ask a human to pay the link, then retry.',
  BUDGET_REQUIRED: `This account needs budgetMinor on every rental. ${budgetFloorNext('budgetMinor')}`,
  BUDGET_TOO_SMALL: `${budgetFloorNext('budgetMinor')} A prepaid account's budget must also buy one whole hour at the offer's price.`,
  KEY_LIMIT_EXCEEDED:
    "Over the key's per-rental cap or total budget (see get_account): lower budgetMinor or the price ceiling.",
  NO_MATCHING_OFFER: 'No offer matches: call list_offers and raise maxHourlyPriceMinor or change gpuModel/gpuCount.',
  OFFER_NOT_FOUND: 'Offer ids change with the inventory: call list_offers again.',
  CONCURRENCY_LIMIT_REACHED:
    'The key runs as many rentals as it may: terminate_deployment one from list_rentals first.',
  IDEMPOTENCY_CONFLICT:
    'That idempotencyKey was used for a different request: a new request needs a new idempotencyKey (or none: one is generated); to retry the first, repeat it unchanged.',
  NOT_FOUND: notFoundNext('call list_rentals'),
  FORBIDDEN:
    'The key lacks the scope: create_rental needs `rent`, create_topup_link `billing`, reveal_ssh_credentials and terminate_deployment `manage`. Ask the account owner for a key that has it.',
};

/** How create_rental names the rental settings in hints about them. */
const SETTING_NAMES = {
  image: 'machine.image',
  env: 'machine.env',
  startupScript: 'machine.startupScript',
  ports: 'machine.ports',
  diskGb: 'machine.diskGb',
  lease: 'terminateAfterSeconds',
  waitForCapacity: 'waitForCapacitySeconds',
  offers: "list_offers shows each offer's capabilities",
  account: 'get_account shows key.maxRentalSeconds',
};

const FAILURE_HOW = {
  rent: 'call create_rental',
  offers: 'list_offers',
  waitForCapacity: 'waitForCapacitySeconds and a gpuModel',
};

/** A refusal of the service as the model reads it: code, status, message, request id and what to do next. */
export const apiFailureText = (err: GprApiError, next: string): string =>
  `${err.code} (HTTP ${err.status}): ${err.message} (request id ${err.requestId ?? 'none'}). Next: ${next}`;

/** Every failure as one tool error: code, message, request id and what to do next. 429 becomes "wait N s". */
export function failure(err: unknown): CallToolResult {
  if (err instanceof GprApiError) {
    if (err.status === 429)
      return refusal(
        `RATE_LIMITED: wait ${err.retryAfterSeconds ?? 60} s before calling again. (request id ${err.requestId ?? 'none'})`,
      );
    const next =
      err.code === 'DEPLOYMENT_NOT_ACTIVE'
        ? notActiveNext(err.retryAfterSeconds, {
            retry: 'call reveal_ssh_credentials again',
            watch: 'call get_rental',
            rent: 'create_rental for a new machine',
          })
        : (rentalRefusalNext(err.code, err.message, SETTING_NAMES) ??
          NEXT[err.code] ??
          (err.status >= 500
            ? 'The service is unavailable for now: retry in a minute.'
            : 'Fix the arguments and retry.'));
    return refusal(apiFailureText(err, next));
  }
  if (err instanceof GprUnsafeValueError) {
    return refusal(
      `${err.code}: ${err.message} Nothing was written or run. Next: do not connect with these values; tell a human the service may be compromised.`,
    );
  }
  if (err instanceof GprRentalStateError) {
    return refusal(
      `${err.code}: ${err.message} Next: ${failureNext(err.code, FAILURE_HOW) ?? 'call get_rental for the failure reason and credit reversal.'}`,
    );
  }
  if (err instanceof GprTimeoutError)
    return refusal(`TIMEOUT: ${err.message} Next: call get_rental again; the operation continues on the service.`);
  if (err instanceof GprNetworkError)
    return refusal(`NETWORK_ERROR: ${err.message} Next: check GPR_BASE_URL; retry later.`);
  return refusal(`CLIENT_ERROR: ${(err as Error)?.message ?? String(err)}`);
}

/** A successful result: structured content plus the same JSON as text for hosts that show text only. */
export function success(structured: Record<string, unknown>): CallToolResult {
  return { structuredContent: structured, content: [{ type: 'text', text: JSON.stringify(structured, null, 2) }] };
}

/** Values this short are not worth hiding and would blank ordinary words and numbers. */
const MIN_SECRET_CHARS = 6;

/**
 * Belt and braces: the token, and the secrets a call sent (variable values, a script), are never
 * part of a result, whatever the API returned.
 */
export function redact<R extends object>(result: R, secrets: readonly string[]): R | CallToolResult {
  let text = JSON.stringify(result);
  const before = text;
  for (const secret of secrets) {
    if (secret.length < MIN_SECRET_CHARS) continue;
    // As the secret appears inside the result's JSON text: escaped (quotes, newlines) twice over in `content`'s text.
    const once = JSON.stringify(secret).slice(1, -1);
    const twice = JSON.stringify(once).slice(1, -1);
    for (const form of new Set([once, twice])) text = text.split(form).join('[redacted]');
  }
  if (text === before) return result;
  try {
    return JSON.parse(text) as R;
  } catch {
    // A secret cut through an escape sequence: show nothing rather than a part of it.
    return refusal(
      'WITHHELD: the result held a secret this call sent, which this server does not pass back. Nothing was shown.',
    );
  }
}
