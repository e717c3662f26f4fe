import { formatUsd } from '../../vocabulary/money.js';
import type { SignedReceiptDto } from '../receipts/receipts.dto.js';

/**
 * One step of a canary as it was seen: `offer_chosen`, `created` (admitted through the rental
 * path), each machine phase of the rental (`creating`, `booting`, `pulling_image`,
 * `waiting_for_ssh`, `checking_gpus`, `starting`), its statuses (`PENDING`, `ACTIVE`,
 * `TERMINATING`, `TERMINATED`, `FAILED`), `nvidia_smi`, and `left` (the run stopped watching).
 */
export interface CanaryPhase {
  phase: string;
  /** When the canary saw it (ISO 8601). */
  at: string;
  /** Milliseconds since the canary started. */
  sinceStartMs: number;
  /** What it is, in words. */
  detail: string;
}

/**
 * How a run ended: `completed` (the whole cycle: ACTIVE, GPUs listed, TERMINATED with verified
 * destruction), `failed` (something did not work; the machine was ended all the same, unless
 * `problem` says otherwise), `interrupted` (a stop signal; the machine was ended), `left` (a
 * second stop signal: the machine is still ending, in the service).
 */
export type CanaryOutcome = 'completed' | 'failed' | 'interrupted' | 'left';

/** One ledger entry of the canary's rental. */
export interface CanaryCharge {
  kind: string;
  /** Signed cents as the ledger holds them (a charge is negative). */
  amountMinor: number;
  description: string;
}

/** What `owner providers canary` prints: text, or this object as JSON with `--json`. */
export interface CanaryReport {
  /** True only for a full cycle (`outcome` completed). */
  ok: boolean;
  outcome: CanaryOutcome;
  provider: string;
  maxSpendMinor: number;
  /** The offer rented; null when none was chosen. */
  offer: { id: string; name: string; gpuCount: number; pricePerHourMinor: number } | null;
  rentalId: string | null;
  deploymentId: string | null;
  phases: CanaryPhase[];
  /** The lines `nvidia-smi -L` printed for the GPUs, over SSH with the rental's key. */
  gpus: string[];
  /** What the rental cost, in cents: the negated sum of its ledger entries; null before it was rented. */
  costMinor: number | null;
  charges: CanaryCharge[];
  /** The rental's last status, once it was rented. */
  status: string | null;
  /** Why the rental ended, as the API says it (USER, SPEND_CAP, EXPIRED, …). */
  terminationReason: string | null;
  /** The verified destruction time (TERMINATED), as the rental shows it. */
  endedAt: string | null;
  /** The machine is known gone: TERMINATED with verified destruction, or the provider has no instance of the rental. */
  destructionVerified: boolean;
  /**
   * The rental's signed teardown receipt (GET /api/v1/rentals/{id}/receipt), once it is TERMINATED
   * with a verified destruction: check it offline with `gpr receipt verify`. Null before then.
   */
  receipt: SignedReceiptDto | null;
  /** What went wrong, when something did; null for a completed run. */
  problem: string | null;
}

/** What an operator is told of a rental left ending: where it ends, and how to see that it did. */
export function stillEndingAdvice(deploymentId: string | null): string {
  return (
    'it stays in the service and ends there: its termination job is written, and any worker (npm start, or --role worker) ' +
    `finishes it (the rental.terminate job of deployment ${deploymentId ?? 'none'} on /admin/jobs); running the canary ` +
    'again ends it first and says when it is gone.'
  );
}

/** Seconds since the start, as the phase lines show them: `+12.3s`. */
export function sinceStart(ms: number): string {
  return `+${(ms / 1000).toFixed(1)}s`;
}

/** The stderr line of one phase, as it happens. */
export function phaseLine(p: CanaryPhase): string {
  return `canary ${sinceStart(p.sinceStartMs).padStart(8)}  ${p.detail}`;
}

const OUTCOME_WORDS: Record<CanaryOutcome, string> = {
  completed: 'completed: a full rent, SSH, GPU and destroy cycle',
  failed: 'FAILED',
  interrupted: 'interrupted',
  left: 'left ending in the service',
};

/** The report as text, for a person. */
export function formatCanaryReport(r: CanaryReport): string {
  const lines = [`Canary on ${r.provider}: ${OUTCOME_WORDS[r.outcome]}.`];
  if (r.problem) lines.push(`Problem: ${r.problem}`);
  lines.push(
    r.offer
      ? `Offer: ${r.offer.gpuCount}x ${r.offer.name} at ${formatUsd(r.offer.pricePerHourMinor)}/h (offer ${r.offer.id}), within --max-spend ${formatUsd(r.maxSpendMinor)}.`
      : `Offer: none rented (--max-spend ${formatUsd(r.maxSpendMinor)}).`,
  );
  if (r.rentalId)
    lines.push(`Rental: ${r.rentalId} (deployment ${r.deploymentId ?? 'none'}), last status ${r.status}.`);
  lines.push('Phases:', ...r.phases.map((p) => `  ${sinceStart(p.sinceStartMs).padStart(8)}  ${p.detail}`));
  lines.push(
    r.gpus.length ? 'GPUs (nvidia-smi -L over SSH with the rental key):' : 'GPUs: none listed.',
    ...r.gpus.map((g) => `  ${g}`),
  );
  if (r.costMinor !== null) {
    lines.push(
      `Cost: ${formatUsd(r.costMinor)} from the ledger (${r.charges.length} entr${r.charges.length === 1 ? 'y' : 'ies'} of the rental)${r.charges.length ? ':' : '.'}`,
      ...r.charges.map((c) => `  ${c.kind} ${formatUsd(c.amountMinor)}  ${c.description}`),
    );
  }
  if (r.receipt) {
    const { receipt, signature } = r.receipt;
    lines.push(
      `Teardown receipt: signed (${signature.alg}, key ${signature.keyId}) by ${receipt.issuer} at ${receipt.issuedAt}: ` +
        `instance ${receipt.instanceId} at ${receipt.providerId} gone (provider: ${receipt.provider.providerState ?? receipt.provider.state}; ` +
        `SSH: ${receipt.ssh.outcome}), charged ${formatUsd(receipt.charged.totalMinor)}. ` +
        "Save it with --json (the report's receipt) and check it with gpr receipt verify <file>.",
    );
  }
  if (r.rentalId) {
    lines.push(
      r.destructionVerified
        ? `Ended: ${r.status}${r.endedAt ? ` at ${r.endedAt}` : ''}${r.terminationReason ? ` (${r.terminationReason})` : ''}, destruction verified.`
        : `Ended: NOT verified; the rental is ${r.status}.`,
    );
  }
  return `${lines.join('\n')}\n`;
}
