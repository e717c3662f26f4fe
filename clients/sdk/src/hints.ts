/**
 * The agent-facing hints, kept once: the service's error messages, OpenAPI descriptions,
 * `/llms.txt` and served skill, the `gpr` command line and the MCP server all take their words
 * from here, so what an agent reads about a field is the same wherever it reads it.
 *
 * Plain constants and small pure functions only: the service imports this file by path, the
 * clients through the SDK's index, and neither may pull I/O in with it.
 */
import { formatDuration } from './duration.js';
import {
  limitText,
  MAX_ENV_TOTAL_BYTES,
  MAX_ENV_VALUE_BYTES,
  MAX_ENV_VARIABLES,
  MAX_EXPOSED_PORTS,
  MAX_STARTUP_SCRIPT_BYTES,
  MAX_WAIT_FOR_CAPACITY_SECONDS,
  MIN_LEASE_SECONDS,
  MIN_WAIT_FOR_CAPACITY_SECONDS,
} from './machine-limits.js';
import { formatCents } from './money.js';

// ---------------------------------------------------------------------------------------------
// Money

/** Every amount on the wire is integer USD cents in a field whose name ends in `Minor`. */
export const MONEY_UNIT = 'USD cents';

/** One sentence saying what a money field means, with a worked example: "USD cents: 350 = $3.50". */
export const MONEY_MEANING = `${MONEY_UNIT}: 350 = ${formatCents(350)}`;

/** True for the name of a money field (`budgetMinor`, `body.amountMinor`, `maxHourlyPriceMinor`). */
export function isMoneyField(name: string): boolean {
  return /Minor$/.test(name);
}

/**
 * What a money field's value must be, for a validation error: the unit, an example, and the
 * range when it is known. `sent` is the value the caller sent, echoed only when it is a short
 * number or string, with its reading in cents when that helps ("3.5" is read as 3.5 cents, not $3.50).
 */
export function moneyFieldHint(field: string, declared: { min?: number; max?: number } = {}, sent?: unknown): string {
  // Admission holds budgetMinor to its floor with the price in hand (BUDGET_TOO_SMALL), so a
  // request schema does not declare it; the floor is part of the field's range all the same.
  const range =
    field === 'budgetMinor' && declared.min === undefined ? { ...declared, min: MIN_BUDGET_MINOR } : declared;
  const bounds =
    range.min !== undefined && range.max !== undefined
      ? ` from ${range.min} to ${range.max} (${formatCents(range.min)} to ${formatCents(range.max)})`
      : range.min !== undefined
        ? ` of at least ${range.min} (${formatCents(range.min)})`
        : range.max !== undefined
          ? ` of at most ${range.max} (${formatCents(range.max)})`
          : '';
  const asDollars = dollarsReading(sent, range);
  const meant =
    asDollars === undefined ? '' : ` If you meant $${asDollars}, send ${Math.round(Number(asDollars) * 100)}.`;
  return `${field} is in ${MONEY_MEANING}; send a whole number${bounds}.${meant}`;
}

/**
 * The dollar amount the caller probably meant, or undefined: a decimal ("3.5", 3.5, "$3.50"), or
 * a whole number under the field's minimum whose cents would be in range (20 meaning $20).
 */
function dollarsReading(sent: unknown, range: { min?: number; max?: number }): string | undefined {
  if (typeof sent !== 'number' && typeof sent !== 'string') return undefined;
  const s = String(sent).trim().replace(/^\$/, '');
  if (/^\d{1,7}\.\d{1,2}$/.test(s)) return Number(s).toFixed(2);
  if (!/^\d{1,7}$/.test(s) || range.min === undefined || Number(s) >= range.min) return undefined;
  const cents = Number(s) * 100;
  return cents >= range.min && (range.max === undefined || cents <= range.max) ? Number(s).toFixed(2) : undefined;
}

// ---------------------------------------------------------------------------------------------
// Budgets

/**
 * The smallest `budgetMinor` the service accepts on any rental, whatever the account's billing
 * model: below it a machine is stopped by its spending cap minutes after it starts.
 */
export const MIN_BUDGET_MINOR = 500;

/** The budget rule in one sentence, as the docs, `/llms.txt` and the skill state it. */
export const BUDGET_RULE =
  `budgetMinor is the most one rental may cost, in ${MONEY_UNIT} (${MIN_BUDGET_MINOR} = ${formatCents(MIN_BUDGET_MINOR)}). ` +
  `When you send it, it must be at least ${MIN_BUDGET_MINOR} (${formatCents(MIN_BUDGET_MINOR)}); leave it out on a balance account to use the key's per-rental cap. ` +
  `The machine is terminated when it has cost that much.`;

/** How long `budgetMinor` cents run a machine at `pricePerHourMinor`: "72 s", "12 min", "3 h 20 min". */
export function runtimeFor(budgetMinor: number, pricePerHourMinor: number): string {
  if (pricePerHourMinor <= 0) return 'unlimited time';
  const seconds = Math.floor((budgetMinor * 3600) / pricePerHourMinor);
  if (seconds < 120) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 120) return `${minutes} min`;
  const h = Math.floor(minutes / 60);
  const m = minutes % 60;
  return m ? `${h} h ${m} min` : `${h} h`;
}

/** The refusal of a budget under {@link MIN_BUDGET_MINOR}, with what it would have bought when the price is known. */
export function budgetTooSmallMessage(budgetMinor: number, pricePerHourMinor?: number): string {
  const buys =
    pricePerHourMinor === undefined || budgetMinor <= 0
      ? ''
      : `; at ${pricePerHourMinor} cents/hour it buys ${runtimeFor(budgetMinor, pricePerHourMinor)}`;
  // A whole number under 100 is most often dollars: 5 meant $5.00, which is 500.
  const meant =
    budgetMinor > 0 && budgetMinor < 100 && budgetMinor * 100 >= MIN_BUDGET_MINOR
      ? `if you meant $${budgetMinor}, send ${budgetMinor * 100}`
      : `e.g. ${MIN_BUDGET_MINOR * 2} for ${formatCents(MIN_BUDGET_MINOR * 2)}`;
  return (
    `budgetMinor is in ${MONEY_UNIT} (${MIN_BUDGET_MINOR} = ${formatCents(MIN_BUDGET_MINOR)}): ${budgetMinor} is ${formatCents(budgetMinor)}${buys}. ` +
    `It must be at least ${MIN_BUDGET_MINOR} (${formatCents(MIN_BUDGET_MINOR)}). Next: send budgetMinor of ${MIN_BUDGET_MINOR} or more (${meant}).`
  );
}

/** The next step after a budget under the floor, for a client whose budget argument is `field` (`--budget <usd>`, `budgetMinor`). */
export function budgetFloorNext(field: string): string {
  return `Budgets start at ${formatCents(MIN_BUDGET_MINOR)} (${MIN_BUDGET_MINOR} ${MONEY_UNIT}) on every rental: raise ${field} to at least that.`;
}

/** The key's per-rental cap against `budgetMinor`: a budget is never cut down to the cap without a word. */
export const KEY_CAP_RULE =
  "A budgetMinor above the key's per-rental cap (maxPerRentalMinor in GET /api/v1/me) is refused with 403 KEY_LIMIT_EXCEEDED, never lowered to it; " +
  'without budgetMinor a balance-account rental stops when it has cost the cap.';

/** The refusal of a `budgetMinor` above the key's per-rental cap, with the next step. */
export function budgetOverKeyCapMessage(budgetMinor: number, capMinor: number): string {
  return (
    `budgetMinor ${budgetMinor} (${formatCents(budgetMinor)}) is above this key's per-rental cap, maxPerRentalMinor ${capMinor} (${formatCents(capMinor)}), in ${MONEY_UNIT}; nothing was started. ` +
    `Next: send budgetMinor of at most ${capMinor}, leave it out to stop at the cap, or ask the account owner for a key with a higher cap.`
  );
}

/** What a rental's spending cap means, for a line under a new rental: "stops when it has cost $5.00 (...)". */
export function spendCapLine(spendCapMinor: number, fromBudget: boolean): string {
  return `Stops when it has cost ${formatCents(spendCapMinor)} (${fromBudget ? 'your budget' : "this key's per-rental cap; pass a budget to set your own, up to the cap"}).`;
}

// ---------------------------------------------------------------------------------------------
// Idempotency-Key

/** Commands that print a fresh UUID on any machine with Node or Linux (uuidgen is often absent). */
export const UUID_RECIPE =
  '`node -e "console.log(crypto.randomUUID())"`, `python3 -c "import uuid; print(uuid.uuid4())"` or `cat /proc/sys/kernel/random/uuid`';

/** The shell substitution the quickstart uses for a fresh key: works wherever Node runs. */
export const UUID_SHELL = `$(node -e "console.log(crypto.randomUUID())")`;

/** What an Idempotency-Key is, that a retry reuses it, and how to make one. */
export const IDEMPOTENCY_KEY_HINT =
  'Idempotency-Key is a header of 1 to 128 printable characters that names this one intent, e.g. a UUID. ' +
  'Send a new one for each new request; when retrying the same request, send the same key and body, so it is done once. ' +
  `Make one with ${UUID_RECIPE}.`;

// ---------------------------------------------------------------------------------------------
// API keys

/** How to send an API key and how to get one; the 401 message carries it for every cause alike. */
export const AUTH_HINT =
  'Send the key as `Authorization: Bearer gpr_<prefix>.<secret>`. ' +
  "A key that worked before and now gets this was revoked: ask the account owner for a new key or a setup code (signing up instead makes a new, unfunded account unrelated to the owner's). " +
  'No key yet: POST /api/v1/signup creates an account and a key (no key needed), or exchange a setup code from the account owner with POST /api/v1/agent-setups/exchange (or `gpr setup <code>`).';

// ---------------------------------------------------------------------------------------------
// GPU names

/** What a GPU name selects, for `/llms.txt`, the OpenAPI description and the skill. */
export const GPU_FAMILY_INTENT =
  'gpuModel names a family or a model: "H100" is the cheapest offer of any H100 (PCIe, SXM, NVL), "A100" the cheapest A100 (which may be 40 GB); ' +
  'name the model ("A100 80GB", "H100 SXM") to get exactly that one. The rental answers with gpuName and matchedBy, saying which it chose.';

/** The count belongs in gpuCount; a count written into the name must agree with it. */
export const GPU_COUNT_IN_NAME =
  'Put the number of GPUs in gpuCount, not in gpuModel; a count written in the name ("2x H100") is accepted only when gpuCount is the same.';

// ---------------------------------------------------------------------------------------------
// Rental state: credentials, termination, revoked keys

/** Statuses that reach ACTIVE by themselves: a reveal refused in one of them succeeds later. */
export const STARTING_STATUSES: readonly string[] = ['PENDING', 'PROVISIONING'];

/** Statuses a rental never leaves for ACTIVE: a reveal refused in one of them never succeeds. */
export const ENDING_STATUSES: readonly string[] = ['TERMINATING', 'TERMINATED', 'FAILED'];

/**
 * The one way to wait on a rental, whichever of its ids the caller holds: its waiting read,
 * answered the moment its status is one of `statuses` (or after `waitSeconds`, as it is then).
 */
export function waitingRead(rentalId: string, statuses: readonly string[]): string {
  return `GET /api/v1/rentals/${rentalId}?waitFor=${statuses.join(',')}`;
}

/**
 * Seconds a reveal refused while the machine starts asks the caller to wait (`Retry-After`), by
 * the phase it is in: a machine being checked is seconds from ACTIVE, one booting or pulling its
 * image a minute or more, one waiting for capacity longer still.
 */
export function revealRetryAfterSeconds(phase: string | null): number {
  switch (phase) {
    case 'waiting_for_ssh':
    case 'checking_gpus':
    case 'starting':
      return 2;
    case 'waiting_for_capacity':
      return 30;
    case 'creating':
    case 'booting':
    case 'pulling_image':
      return 10;
    default:
      return 5;
  }
}

/**
 * The refusal of a credentials reveal on deployment `deploymentId` (of rental `rentalId`) while it
 * is `status`, not ACTIVE: whether it will become ACTIVE, and how to wait for it or what to do instead.
 */
export function revealNotActiveMessage(
  status: string,
  deploymentId: string,
  rentalId: string,
  retryAfterSeconds?: number,
): string {
  const head = `Credentials exist only while a deployment is ACTIVE; ${deploymentId} is ${status}.`;
  const wait = `wait with ${waitingRead(rentalId, ['ACTIVE', 'FAILED'])} (answered the moment its status changes), then reveal again`;
  if (STARTING_STATUSES.includes(status)) {
    return `${head} The machine is starting: ${wait}${retryAfterSeconds === undefined ? '' : `, or retry in ${retryAfterSeconds} s (Retry-After)`}.`;
  }
  if (status === 'AWAITING_PAYMENT')
    return `${head} It starts once its card payment arrives: have the checkout link paid, then ${wait}.`;
  return `${head} It will never be ACTIVE again, so do not retry: GET /api/v1/rentals/${rentalId} says how it ended; rent a new machine with POST /api/v1/rentals.`;
}

/**
 * What to do after a reveal refused as DEPLOYMENT_NOT_ACTIVE, for a client that knows only the
 * answer's `Retry-After`: present while the machine starts, absent once waiting cannot help.
 * `how` names the client's own ways to retry, to watch the rental and to rent anew.
 */
export function notActiveNext(
  retryAfterSeconds: number | undefined,
  how: { retry: string; watch: string; rent: string },
): string {
  return retryAfterSeconds !== undefined
    ? `The machine is still starting: wait ${retryAfterSeconds} s, then ${how.retry} (or ${how.watch} until its status is ACTIVE).`
    : `Waiting does not help: a rental AWAITING_PAYMENT starts only once paid, and one TERMINATING, TERMINATED or FAILED is never ACTIVE again (do not retry; ${how.rent}).`;
}

/** What to do after NOT_FOUND on a rental or deployment id; `list` is the client's way to list its rentals. */
export function notFoundNext(list: string): string {
  return `Nothing with this id is visible to this key (a rental id and its deployment id both work; other keys' rentals are not visible): ${list} and use an id from there.`;
}

/** The answer to a terminate request, by the status the deployment has after it. */
export function terminateMessage(status: string, rentalId: string): string {
  switch (status) {
    case 'TERMINATED':
      return `Already TERMINATED: the machine is destroyed and charges have stopped (endedAt on GET /api/v1/rentals/${rentalId}). Nothing more to do.`;
    case 'FAILED':
      return `Already FAILED: it never became ACTIVE, and any debit for it is returned (reversalStatus on the rental). Nothing more to do.`;
    case 'AWAITING_PAYMENT':
      return `Termination recorded: the rental awaits card payment, and will be terminated instead of started if the payment arrives.`;
    default:
      return `Termination requested: the deployment is ${status}. Wait with ${waitingRead(rentalId, ['TERMINATED'])} (answered the moment its machine is verified gone); charges stop at the request.`;
  }
}

/**
 * What became of a revoked key's unfinished rentals: `count` of them, terminated with the key
 * when `terminated`, else left running (revoking a key stops the key, not its machines).
 */
export function revokedKeyRentalsNote(count: number, terminated: boolean): string {
  if (count === 0) return 'The key had no unfinished rentals.';
  const n = count === 1 ? '1 rental' : `${count} rentals`;
  return terminated
    ? `${n} of the key terminated with it: wait for each with ${waitingRead('{rentalId}', ['TERMINATED'])} (liveRentals lists their ids).`
    : `${n} of the key keep running and are charged until terminated: terminate each with POST /api/v1/deployments/{deploymentId}/terminate, or repeat this call with ?terminateRentals=true.`;
}

// ---------------------------------------------------------------------------------------------
// Machines: settings, leases, phases, waiting for capacity

/** What ACTIVE promises, for `/llms.txt`, the skill and the clients. */
export const ACTIVE_MEANS =
  "ACTIVE means usable: SSH with the rental's own key gets in, `nvidia-smi -L` lists as many GPUs as the offer promised, " +
  'and the startup script, if any, has started (it may still be running).';

/** A rental's `machine`, in two sentences. */
export const MACHINE_SETTINGS_RULE =
  "A rental may carry `machine`: `image` (a container image; needs the offer's `capabilities.customImage`), " +
  `\`env\` (up to ${MAX_ENV_VARIABLES} variables named like \`HF_TOKEN\`, set for the machine's processes, the startup script and SSH logins, on every offer), ` +
  `\`startupScript\` (up to ${limitText(MAX_STARTUP_SCRIPT_BYTES)} bytes, run once after boot as the SSH user, output in \`~/.gpr/startup.log\`; needs \`capabilities.startupScript\`), ` +
  `\`ports\` (up to ${MAX_EXPOSED_PORTS} TCP ports served over HTTP(S), no more than \`capabilities.ports\`; their URLs are the rental's \`endpoints\` once ACTIVE) ` +
  'and `diskGb` (up to `capabilities.maxDiskGb`; null there: the disk cannot be chosen). ' +
  'Variable values and the script are secrets: sealed at rest, never logged, never returned (reads show only `envNames` and `startupScriptSha256`).';

/** A lease (`terminateAfterSeconds`) and the key's `maxRentalSeconds`. */
export const LEASE_RULE =
  `\`terminateAfterSeconds\` is a lease: the rental is terminated (reason EXPIRED) that many seconds after it becomes ACTIVE, on any billing model, from ${MIN_LEASE_SECONDS} up to the offer's \`maximumDurationSeconds\`. ` +
  "A key's `maxRentalSeconds` (GET /api/v1/me) caps it: a longer lease is refused with 422, never shortened, and without one the key's maximum is the lease. " +
  'The rental shows `leaseSeconds`, and `endsAt` once ACTIVE.';

/** Waiting for capacity (`waitForCapacitySeconds`). */
export const WAIT_FOR_CAPACITY_RULE =
  `\`waitForCapacitySeconds\` (${MIN_WAIT_FOR_CAPACITY_SECONDS} to ${limitText(MAX_WAIT_FOR_CAPACITY_SECONDS)}; GPU intent only, on a balance account) keeps a rental PENDING in phase \`waiting_for_capacity\` when no eligible offer is on sale, ` +
  'and starts it as soon as one appears; at `waitForCapacityUntil` it fails with NO_CAPACITY and nothing is charged.';

/** The next step after NO_MATCHING_OFFER for a known model that is not on sale as asked: wait for it. */
export const WAIT_FOR_CAPACITY_NEXT =
  `To wait for one instead, send the same request with waitForCapacitySeconds (${MIN_WAIT_FOR_CAPACITY_SECONDS} to ${limitText(MAX_WAIT_FOR_CAPACITY_SECONDS)}, on a balance account): ` +
  'it stays PENDING in phase waiting_for_capacity and starts as soon as an eligible offer appears.';

/** The phases a starting rental shows. */
export const PHASES_RULE =
  'While PENDING or PROVISIONING, `phase` (since `phaseSince`) says where it stands: `waiting_for_capacity`, `creating`, `booting` or `pulling_image`, ' +
  '`waiting_for_ssh`, `checking_gpus`, `starting` (the startup script has not started yet). ' +
  'A machine with fewer GPUs than promised is destroyed and the next candidate tried; with none left the rental fails with GPU_MISMATCH.';

export { ENV_NAME_PATTERN } from './machine-limits.js';

/** How a client names a rental's settings, and where it shows offers' capabilities and the key's limits. */
export interface RentalSettingNames {
  image: string;
  env: string;
  startupScript: string;
  ports: string;
  diskGb: string;
  lease: string;
  waitForCapacity: string;
  /** Where offers' `capabilities` are shown, e.g. "see `gpr offers`". */
  offers: string;
  /** Where the key's `maxRentalSeconds` is shown, e.g. "see `gpr whoami`". */
  account: string;
}

/**
 * The next step after a refusal (422) whose message names a machine setting, the lease or the
 * wait for capacity; undefined for any other. The service's message says what is wrong; this says
 * where to look and what to change, in the client's own words.
 */
export function rentalSettingNext(message: string, n: RentalSettingNames): string | undefined {
  switch (/\bmachine\.(image|env|startupScript|ports|diskGb)\b/.exec(message)?.[1]) {
    case 'image':
      return `Give ${n.image} as registry/path:tag, an image the service allows, on an offer whose capabilities.customImage is true (${n.offers}); or leave it out for the provider's default image.`;
    case 'env':
      return `Variables (${n.env}) are named with upper-case letters, digits and _, not starting with a digit; at most ${MAX_ENV_VARIABLES}, each value up to ${limitText(MAX_ENV_VALUE_BYTES)} bytes, ${limitText(MAX_ENV_TOTAL_BYTES)} bytes in all. Put larger data in a file the startup script fetches.`;
    case 'startupScript':
      return `The startup script (${n.startupScript}) is at most ${limitText(MAX_STARTUP_SCRIPT_BYTES)} bytes and needs an offer whose capabilities.startupScript is true (${n.offers}); or run it over SSH once the rental is ACTIVE.`;
    case 'ports':
      return `Expose at most ${MAX_EXPOSED_PORTS} ports (${n.ports}), each once and not 22, on an offer whose capabilities.ports is at least that many (${n.offers}); or reach them through an SSH tunnel.`;
    case 'diskGb':
      return `Ask for at most the offer's capabilities.maxDiskGb with ${n.diskGb} (${n.offers}; null there: the disk cannot be chosen), or leave it out for the default disk.`;
  }
  if (/\bterminateAfterSeconds\b/.test(message)) {
    return /\bkey\b|maxRentalSeconds/.test(message)
      ? `This key's maxRentalSeconds (${n.account}) caps every lease: give ${n.lease} of at most that, or leave it out and the key's maximum is the lease. Only the key's owner can raise it.`
      : `${n.lease} is at least ${MIN_LEASE_SECONDS} s and at most the offer's maximumDurationSeconds (${n.offers}).`;
  }
  if (/\bwaitForCapacitySeconds\b/.test(message)) {
    return `${n.waitForCapacity} is 60 s to 24 h, on a rental by GPU model (an exact offer cannot wait) of a balance account.`;
  }
  return undefined;
}

/**
 * {@link rentalSettingNext} for the refusals that can name a setting: 422 VALIDATION_FAILED, and
 * NO_MATCHING_OFFER when no offer of the model and price can honour the settings it names; and a
 * rental body over its size limit (413), which names the script and the variables.
 */
export function rentalRefusalNext(code: string, message: string, n: RentalSettingNames): string | undefined {
  if (code === 'PAYLOAD_TOO_LARGE' && /\bmachine\./.test(message)) {
    return (
      `The startup script (${n.startupScript}) is at most ${limitText(MAX_STARTUP_SCRIPT_BYTES)} bytes and the variables (${n.env}) at most ${MAX_ENV_VARIABLES} ` +
      `of ${limitText(MAX_ENV_VALUE_BYTES)} bytes, ${limitText(MAX_ENV_TOTAL_BYTES)} bytes in all: shorten the one over its limit, or put larger data in a file the startup script fetches.`
    );
  }
  return code === 'VALIDATION_FAILED' || code === 'NO_MATCHING_OFFER' ? rentalSettingNext(message, n) : undefined;
}

/**
 * The next step after a rental FAILED with `code`, when its failureReason alone does not say it;
 * `how` names the client's ways to rent, to list offers and to wait for capacity.
 */
export function failureNext(
  code: string,
  how: { rent: string; offers: string; waitForCapacity: string },
): string | undefined {
  if (code === 'GPU_MISMATCH') {
    return (
      'The machine came up with fewer GPUs than its offer promised and was destroyed (so did every other candidate); the rental never started, so nothing is charged for it (see reversalStatus). ' +
      `To go on, ${how.rent} again, preferably another offer or provider (${how.offers}).`
    );
  }
  if (code === 'NO_CAPACITY') {
    return `No eligible offer had capacity, and nothing is charged. To go on, ${how.rent} again with a higher price ceiling or another model, or let it wait for capacity with ${how.waitForCapacity}.`;
  }
  return undefined;
}

/** The line under a new rental with a lease: when it ends, and who set the lease (`flag`: the client's lease argument). */
export function leaseLine(leaseSeconds: number, askedFor: boolean, flag: string): string {
  const why = askedFor ? 'the lease you asked for' : `this key's maxRentalSeconds; ${flag} sets a shorter lease`;
  return `Terminated ${formatDuration(leaseSeconds)} after it becomes ACTIVE (${why}); endsAt shows when.`;
}

/** The line under a rental waiting for capacity until `until`. */
export function capacityLine(until: string): string {
  return `Waits for capacity until ${until}: it starts as soon as an eligible offer appears, else it fails with NO_CAPACITY and nothing is charged.`;
}
