/**
 * The agent-facing hints, kept once: the service's error messages, OpenAPI descriptions,
 * `/llms.txt` and served skill, the `gpr` command line and the MCP server all take their words
 * from here, so what an agent reads about a field is the same wherever it reads it.
 *
 * Plain constants and small pure functions only: the service imports this file by path, the
 * clients through the SDK's index, and neither may pull I/O in with it.
 */
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
export function moneyFieldHint(field: string, range: { min?: number; max?: number } = {}, sent?: unknown): string {
  const bounds =
    range.min !== undefined && range.max !== undefined
      ? ` from ${range.min} to ${range.max} (${formatCents(range.min)} to ${formatCents(range.max)})`
      : range.min !== undefined
        ? ` of at least ${range.min} (${formatCents(range.min)})`
        : range.max !== undefined
          ? ` of at most ${range.max} (${formatCents(range.max)})`
          : '';
  const asDollars = dollarsReading(sent);
  const meant = asDollars === undefined ? '' : ` If you meant $${asDollars}, send ${Math.round(Number(asDollars) * 100)}.`;
  return `${field} is in ${MONEY_MEANING}; send a whole number${bounds}.${meant}`;
}

/** "3.5" or 3.5 or "$3.50" as the dollar amount the caller probably meant, or undefined. */
function dollarsReading(sent: unknown): string | undefined {
  if (typeof sent !== 'number' && typeof sent !== 'string') return undefined;
  const s = String(sent).trim().replace(/^\$/, '');
  if (!/^\d{1,7}\.\d{1,2}$/.test(s)) return undefined;
  return Number(s).toFixed(2);
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
  const buys = pricePerHourMinor === undefined ? '' : `; at ${pricePerHourMinor} cents/hour it buys ${runtimeFor(budgetMinor, pricePerHourMinor)}`;
  return (
    `budgetMinor is in ${MONEY_UNIT} (${MIN_BUDGET_MINOR} = ${formatCents(MIN_BUDGET_MINOR)}): ${budgetMinor} is ${formatCents(budgetMinor)}${buys}. ` +
    `It must be at least ${MIN_BUDGET_MINOR} (${formatCents(MIN_BUDGET_MINOR)}). Next: send budgetMinor of ${MIN_BUDGET_MINOR} or more` +
    ` (e.g. ${budgetMinor < 100 ? budgetMinor * 100 : MIN_BUDGET_MINOR * 2} for ${formatCents(budgetMinor < 100 ? budgetMinor * 100 : MIN_BUDGET_MINOR * 2)}).`
  );
}

// ---------------------------------------------------------------------------------------------
// Idempotency-Key

/** Commands that print a fresh UUID on any machine with Node or Linux (uuidgen is often absent). */
export const UUID_RECIPE = '`node -e "console.log(crypto.randomUUID())"`, `python3 -c "import uuid; print(uuid.uuid4())"` or `cat /proc/sys/kernel/random/uuid`';

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
  'No key yet: POST /api/v1/signup creates an account and a key (no key needed), or exchange a setup code from the account owner with POST /api/v1/agent-setups/exchange (or `gpr setup <code>`).';

// ---------------------------------------------------------------------------------------------
// GPU names

/** What a GPU name selects, for `/llms.txt`, the OpenAPI description and the skill. */
export const GPU_FAMILY_INTENT =
  'gpuModel names a family or a model: "H100" is the cheapest offer of any H100 (PCIe, SXM, NVL), "A100" the cheapest A100 (which may be 40 GB); ' +
  'name the model ("A100 80GB", "H100 SXM") to get exactly that one. The rental answers with gpuName and matchedBy, saying which it chose.';

/** The count belongs in gpuCount; a count written into the name must agree with it. */
export const GPU_COUNT_IN_NAME =
  'Put the number of GPUs in gpuCount, not in gpuModel: {"gpuModel": "H100", "gpuCount": 2}. A count in the name ("2x H100") is accepted only when gpuCount is the same.';
