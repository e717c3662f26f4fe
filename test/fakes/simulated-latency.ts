/**
 * The time a fake takes because the service it stands for takes it: an answer's latency, a boot,
 * a long poll held open. The one place fakes set timers, named so (test/unit/no-fixed-sleeps.test.ts
 * allows timers only here and in test/helpers/wait.ts). Tests never wait on these times; they wait
 * on what the fake does when its time is up.
 */

/** Resolves after `ms`: latency the fake simulates before it answers. */
export const simulatedLatency = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Runs `fn` after `ms` of simulated latency (a machine booting, a held request running out); clear it with clearTimeout. */
export const afterSimulatedLatency = (ms: number, fn: () => void): NodeJS.Timeout => setTimeout(fn, ms);
