/** The global setup's pick of this run's place among the host's uid blocks (see {@link sandboxUidOptions}). */
export const RUN_UID_SLOT_VARIABLE = 'GPR_TEST_UID_SLOT';

/** Runs a host can tell apart: 20,000 slots of two 10,000-uid blocks, from 300000 up (past the default block). */
const SLOTS = 20_000;
const BLOCK = 10_000;
const WORKERS_PER_SLOT = 2;

/** A slot for a new run, at random: two runs on one host (two checkouts, or a run beside another) rarely share one. */
export function newRunUidSlot(): string {
  return String(Math.floor(Math.random() * SLOTS));
}

/**
 * The local provider's sandbox uids for this test process. Tests run machines as root on one
 * host, with databases of their own, so each process takes a block of uids of its own: ending a
 * machine kills every process of its uid, and two processes allocating from one block (two workers
 * of a run, or two runs side by side) would end each other's machines. A process started outside
 * mocha's global setup keeps the provider's default block.
 */
export function sandboxUidOptions(): { SANDBOX_UID_FIRST: string; SANDBOX_UID_COUNT: string } | Record<string, never> {
  const slot = process.env[RUN_UID_SLOT_VARIABLE];
  const worker = Number(process.env.MOCHA_WORKER_ID ?? 0) % WORKERS_PER_SLOT;
  if (slot === undefined) return {};
  return {
    SANDBOX_UID_FIRST: String(300_000 + (Number(slot) * WORKERS_PER_SLOT + worker) * BLOCK),
    SANDBOX_UID_COUNT: String(BLOCK),
  };
}

/** The same, as the service's environment variables (LOCAL_PROVIDER_…). */
export function sandboxUidEnv(): Record<string, string> {
  return Object.fromEntries(Object.entries(sandboxUidOptions()).map(([k, v]) => [`LOCAL_PROVIDER_${k}`, v]));
}
