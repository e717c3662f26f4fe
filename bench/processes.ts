/*
 * The child processes and worker threads a bench starts end with it: on normal exit, on failure,
 * and on SIGINT, SIGTERM or SIGHUP. A bench's entry point runs through `runBench`, registers what it
 * starts with `ownChild` / `ownWorker`, and a child process calls `exitWithParent` so that it also
 * goes when the parent dies without a word (SIGKILL): a child left behind keeps running and holds
 * the bench's output pipe open, so whoever waits on that pipe waits for it.
 *
 *   runBench(async () => {
 *     const child = ownChild(fork(file, ['--child']));     // the child calls exitWithParent()
 *     ...
 *     await endChild(child);                               // or leave it: runBench ends it
 *   });
 */
import { readFileSync } from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import { constants } from 'node:os';
import type { Worker } from 'node:worker_threads';

const children = new Set<ChildProcess>();
const workers = new Set<Worker>();

function alive(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null;
}

/** Ends `child` with `signal` when it has not yet exited; never throws. */
function signal(child: ChildProcess, sig: NodeJS.Signals): void {
  if (!alive(child)) return;
  try {
    child.kill(sig);
  } catch {
    // It exited between the check and the signal.
  }
}

/** Registers a child process to be ended with the bench; returns it. */
export function ownChild<T extends ChildProcess>(child: T): T {
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

/** Registers a worker thread to be terminated with the bench; returns it. */
export function ownWorker(worker: Worker): Worker {
  workers.add(worker);
  worker.once('exit', () => workers.delete(worker));
  return worker;
}

/** Resolves when `child` has exited (at once when it already has). */
export function exited(child: ChildProcess): Promise<void> {
  if (!alive(child)) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

/** Asks `child` to stop with SIGTERM and waits for it; SIGKILL after `graceMs`. */
export async function endChild(child: ChildProcess, graceMs = 5_000): Promise<void> {
  signal(child, 'SIGTERM');
  const gone = exited(child);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((r) => (timer = setTimeout(() => r('late'), graceMs)));
  if ((await Promise.race([gone, late])) === 'late') signal(child, 'SIGKILL');
  clearTimeout(timer);
  await gone;
}

/** Ends every child process and worker thread still registered. */
export async function endAll(graceMs = 5_000): Promise<void> {
  await Promise.all([
    ...[...children].map((c) => endChild(c, graceMs)),
    ...[...workers].map((w) => w.terminate().then(() => undefined)),
  ]);
}

let installed = false;

/**
 * Runs a bench's `main`, then ends what it left running and exits: 0 when `main` resolved, 1 (its
 * error printed) when it failed, 128 + the signal's number on SIGINT, SIGTERM or SIGHUP. A second
 * signal during that shutdown kills the children at once.
 */
export function runBench(main: () => Promise<void>): void {
  if (!installed) {
    installed = true;
    // The last resort, for any exit path that skipped the orderly one (process.exit elsewhere):
    // only synchronous work happens in an 'exit' handler, and a kill is synchronous.
    process.on('exit', () => {
      for (const c of children) signal(c, 'SIGKILL');
    });
    let stopping = false;
    for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
      process.on(sig, () => {
        const code = 128 + constants.signals[sig];
        if (stopping) process.exit(code);
        stopping = true;
        console.error(`bench: ${sig}, ending ${children.size} child process(es) and ${workers.size} worker thread(s)`);
        void endAll(2_000).finally(() => process.exit(code));
      });
    }
  }
  main().then(
    async () => {
      await endAll();
      process.exit(0);
    },
    async (err: unknown) => {
      console.error(err);
      await endAll();
      process.exit(1);
    },
  );
}

/**
 * In a child process started with an IPC channel (fork, or 'ipc' in its stdio): exits when that
 * channel closes, which it does however the parent ends. The channel no longer keeps the child
 * alive by itself.
 */
export function exitWithParent(code = 1): void {
  if (!process.channel) throw new Error('exitWithParent needs an IPC channel to the parent (fork, or "ipc" in stdio)');
  process.once('disconnect', () => process.exit(code));
  process.channel.unref();
}

/**
 * The V8 flags production starts the service with, read from `npm start` (the image and the
 * systemd units use the same, as a test holds), so a bench's service process runs as deployed.
 */
export function productionNodeFlags(): string[] {
  const start: string = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).scripts.start;
  return start.split(/\s+/).filter((arg) => arg.startsWith('--'));
}
