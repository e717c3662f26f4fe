/**
 * The budget's words: its floor, what a budget buys, the key's per-rental cap, for the service's
 * refusals, `/llms.txt`, the skill and the clients' lines under a new rental.
 */
import { MIN_BUDGET_MINOR } from './limits.js';
import { formatUsd, formatUsdShort, MONEY_UNIT } from './money.js';

export const BUDGET_RULE =
  `budgetMinor is the most one rental may cost, in ${MONEY_UNIT} (${MIN_BUDGET_MINOR} = ${formatUsd(MIN_BUDGET_MINOR)}). ` +
  `When you send it, it must be at least ${MIN_BUDGET_MINOR} (${formatUsd(MIN_BUDGET_MINOR)}); leave it out on a balance account to use the key's per-rental cap. ` +
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
      ? `if you meant ${formatUsdShort(budgetMinor * 100)}, send ${budgetMinor * 100}`
      : `e.g. ${MIN_BUDGET_MINOR * 2} for ${formatUsd(MIN_BUDGET_MINOR * 2)}`;
  return (
    `budgetMinor is in ${MONEY_UNIT} (${MIN_BUDGET_MINOR} = ${formatUsd(MIN_BUDGET_MINOR)}): ${budgetMinor} is ${formatUsd(budgetMinor)}${buys}. ` +
    `It must be at least ${MIN_BUDGET_MINOR} (${formatUsd(MIN_BUDGET_MINOR)}). Next: send budgetMinor of ${MIN_BUDGET_MINOR} or more (${meant}).`
  );
}

/** The next step after a budget under the floor, for a client whose budget argument is `field` (`--budget <usd>`, `budgetMinor`). */
export function budgetFloorNext(field: string): string {
  return `Budgets start at ${formatUsd(MIN_BUDGET_MINOR)} (${MIN_BUDGET_MINOR} ${MONEY_UNIT}) on every rental: raise ${field} to at least that.`;
}

/** The key's per-rental cap against `budgetMinor`: a budget is never cut down to the cap without a word. */
export const KEY_CAP_RULE =
  "A budgetMinor above the key's per-rental cap (maxPerRentalMinor in GET /api/v1/me) is refused with 403 KEY_LIMIT_EXCEEDED, never lowered to it; " +
  'without budgetMinor a balance-account rental stops when it has cost the cap.';

/** The refusal of a `budgetMinor` above the key's per-rental cap, with the next step. */
export function budgetOverKeyCapMessage(budgetMinor: number, capMinor: number): string {
  return (
    `budgetMinor ${budgetMinor} (${formatUsd(budgetMinor)}) is above this key's per-rental cap, maxPerRentalMinor ${capMinor} (${formatUsd(capMinor)}), in ${MONEY_UNIT}; nothing was started. ` +
    `Next: send budgetMinor of at most ${capMinor}, leave it out to stop at the cap, or ask the account owner for a key with a higher cap.`
  );
}

/** What a rental's spending cap means, for a line under a new rental: "stops when it has cost $5.00 (...)". */
export function spendCapLine(spendCapMinor: number, fromBudget: boolean): string {
  return `Stops when it has cost ${formatUsd(spendCapMinor)} (${fromBudget ? 'your budget' : "this key's per-rental cap; pass a budget to set your own, up to the cap"}).`;
}
