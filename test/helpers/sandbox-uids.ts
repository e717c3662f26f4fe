/** The global setup's pick of this run's place among the host's uid blocks (see {@link sandboxUidOptions}). */
export const RUN_UID_SLOT_VARIABLE = 'GPR_TEST_UID_SLOT';

/** Runs a host can tell apart: 20,000 slots of two 10,000-uid blocks, from 300000 up (past the default block). */
const FIRST_UID = 300_000;
const SLOTS = 20_000;
const BLOCK = 10_000;
const WORKERS_PER_SLOT = 2;
/** The start of a process's block, for its in-process providers on its own test database. */
const OWN_UIDS = 5_000;
/** The rest of the block, in shares of this size: one per other database (a spawned service, a context of its own). */
const SHARE_UIDS = 50;
const SHARES = (BLOCK - OWN_UIDS) / SHARE_UIDS;

/** A slot for a new run, at random: two runs on one host (two checkouts, or a run beside another) rarely share one. */
export function newRunUidSlot(): string {
  return String(Math.floor(Math.random() * SLOTS));
}

interface ShareState {
  /** A process outside mocha's global setup draws a slot of its own (the cluster suite). */
  slot?: string;
  /** Database URL to its share, in order of first use. */
  shares: Map<string, number>;
}

// On globalThis, as test/helpers/db.ts keeps its state: mocha may load this file twice in one
// process, and two counters would hand two databases one share.
const STATE_KEY = Symbol.for('gpu-rental.test-sandbox-uids');
const state = ((globalThis as Record<symbol, unknown>)[STATE_KEY] ??= {
  shares: new Map(),
} satisfies ShareState) as ShareState;

function blockStart(): number {
  const slot = process.env[RUN_UID_SLOT_VARIABLE] ?? (state.slot ??= newRunUidSlot());
  const worker = Number(process.env.MOCHA_WORKER_ID ?? 0) % WORKERS_PER_SLOT;
  return FIRST_UID + (Number(slot) * WORKERS_PER_SLOT + worker) * BLOCK;
}

/**
 * The local provider's sandbox uids for a service of this test process. Tests run machines as
 * root on one host, with databases of their own; ending a machine kills every process of its uid,
 * so the provider refuses a block another service's running process claims (plugins/local/uid-claims.ts).
 * Each test process takes a block of its own (two workers of a run, two runs side by side): its
 * in-process providers on its own database take the start of it (no `databaseUrl`), and each other
 * database the next free share, the same one every time (the api and worker processes of one
 * spawned deployment share it). After {@link SHARES} databases the shares are used again, by then
 * for services long stopped.
 */
export function sandboxUidOptions(databaseUrl?: string): { SANDBOX_UID_FIRST: string; SANDBOX_UID_COUNT: string } {
  const start = blockStart();
  if (databaseUrl === undefined) return { SANDBOX_UID_FIRST: String(start), SANDBOX_UID_COUNT: String(OWN_UIDS) };
  let share = state.shares.get(databaseUrl);
  if (share === undefined) {
    share = state.shares.size % SHARES;
    state.shares.set(databaseUrl, share);
  }
  return {
    SANDBOX_UID_FIRST: String(start + OWN_UIDS + share * SHARE_UIDS),
    SANDBOX_UID_COUNT: String(SHARE_UIDS),
  };
}

/** The same, as the service's environment variables (LOCAL_PROVIDER_…). */
export function sandboxUidEnv(databaseUrl?: string): Record<string, string> {
  return Object.fromEntries(Object.entries(sandboxUidOptions(databaseUrl)).map(([k, v]) => [`LOCAL_PROVIDER_${k}`, v]));
}
