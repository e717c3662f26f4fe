/** Prefix of every instance label (main.ts hands it to the plugins as `labelPrefix`, so reconciliation finds only our instances). */
export const LABEL_PREFIX = 'gpr-';

/** Deterministic per deployment and attempt, so a re-run looks up exactly the instance it may have made. */
export function instanceLabel(deploymentId: string, attempt: number): string {
  return `${LABEL_PREFIX}${deploymentId}-${attempt}`;
}

/** Ledger reference of a legacy rental's admission debit; one per rental, ever. */
export const rentalDebitRef = (rentalId: string): string => `rental:${rentalId}:debit`;
/** Ledger reference of the one reversal of a failed rental's debit. */
export const reversalRef = (rentalId: string): string => `rental:${rentalId}:reversal`;
/** Ledger reference of metered usage of a deployment up to `untilMs`. */
export const usageRef = (deploymentId: string, untilMs: number): string => `usage:${deploymentId}:${untilMs}`;
