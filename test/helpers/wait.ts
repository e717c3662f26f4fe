/**
 * How tests wait: on a condition, an event or a barrier, never for a fixed time. A machine under
 * load makes these slower, never wrong. Besides test/fakes/simulated-latency.ts (the time fakes
 * take, as their services do), the one file of test/ that sets timers: test/unit/no-fixed-sleeps.test.ts
 * checks that.
 */

/** What a wait is for, named in its failure; a function is asked at the timeout, so it can show the latest state. */
export type WaitWhat = string | (() => string);

export interface WaitOptions {
  /** What is waited for, as the failure names it. */
  what: WaitWhat;
  /** How long before giving up (default {@link DEFAULT_WAIT_MS}): a bound on a stuck wait, not a pace. */
  timeoutMs?: number;
  /** Time between two looks at a condition (default 50 ms). */
  intervalMs?: number;
  /** Whether a throw of the condition ends the wait with it (default: it is looked at again, as state not yet there). */
  throws?: boolean;
}

/** Generous: a wait ends as soon as its condition holds, so only a stuck one runs this long. */
export const DEFAULT_WAIT_MS = 20_000;

const described = (what: WaitWhat): string => (typeof what === 'function' ? what() : what);

/**
 * Looks at `condition` every `intervalMs` until it returns a truthy value, which it resolves with;
 * rejects once `timeoutMs` has passed, naming `what` and the last error `condition` threw (at the
 * first throw, with that error, under `throws`). Poll
 * only state that announces nothing (a row, a file, another process's output); where something
 * announces itself, wait on that ({@link deferred}, an event) instead.
 */
export async function waitFor<T>(
  condition: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  { what, timeoutMs = DEFAULT_WAIT_MS, intervalMs = 50, throws = false }: WaitOptions,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await condition();
      if (v) return v;
    } catch (err) {
      if (throws) throw err;
      last = err;
    }
    // Checked after a look, so a slow `condition` still gets its last look before the deadline counts.
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${described(what)}${last ? `: ${(last as Error).message}` : ''}`,
      );
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

export interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(err: unknown): void;
}

/** A promise with its settling functions: a barrier a test opens when it has seen what it waits for. */
export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** `promise`, or a rejection naming `what` once `timeoutMs` has passed first. */
export async function withTimeout<T>(
  promise: Promise<T>,
  { what, timeoutMs = DEFAULT_WAIT_MS }: WaitOptions,
): Promise<T> {
  const settled = await settledWithin(promise, timeoutMs);
  if (!settled) throw new Error(`timed out after ${timeoutMs} ms waiting for ${described(what)}`);
  return settled.value;
}

/**
 * What `promise` resolves to, or undefined when `timeoutMs` passes first: the grace period of
 * something that should end by itself (a process asked to exit), after which the caller insists.
 */
export async function settledWithin<T>(promise: Promise<T>, timeoutMs: number): Promise<{ value: T } | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), timeoutMs)));
  try {
    return await Promise.race([promise.then((value) => ({ value })), expired]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Calls `onExpiry` unless the returned function is called first, within `timeoutMs`: a bound on
 * something that ends by an event (a child process that should exit), so a stuck one cannot hang the run.
 */
export function watchdog(timeoutMs: number, onExpiry: () => void): () => void {
  const timer = setTimeout(onExpiry, timeoutMs);
  timer.unref();
  return () => clearTimeout(timer);
}
