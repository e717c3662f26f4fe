/**
 * The local provider's sandbox uids for this test process. The workers of a parallel run each run
 * machines as root on one host, with databases of their own, so each takes a block of uids of its
 * own: ending a machine kills every process of its uid, and two workers allocating from one block
 * would end each other's machines. A run in one process keeps the provider's default block.
 */
export function sandboxUidOptions(): { SANDBOX_UID_FIRST: string; SANDBOX_UID_COUNT: string } | Record<string, never> {
  const worker = process.env.MOCHA_WORKER_ID;
  if (worker === undefined) return {};
  // Past the default block (200000-299999), 10,000 uids a worker.
  return { SANDBOX_UID_FIRST: String(300_000 + Number(worker) * 10_000), SANDBOX_UID_COUNT: '10000' };
}

/** The same, as the service's environment variables (LOCAL_PROVIDER_…). */
export function sandboxUidEnv(): Record<string, string> {
  return Object.fromEntries(Object.entries(sandboxUidOptions()).map(([k, v]) => [`LOCAL_PROVIDER_${k}`, v]));
}
