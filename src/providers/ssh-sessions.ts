import {
  closeSession,
  openSession,
  runCommand,
  SSH_CONNECT_TIMEOUT_MS,
  type SshExecResult,
  type SshOptions,
  type SshSession,
  type SshTarget,
} from './ssh-probe.js';

/**
 * Authenticated SSH connections kept between commands, one per key (a rental), so a check that
 * repeats (the idle sample) costs a channel on a connection already logged in instead of a key
 * exchange and a signature each time. The bounds of every command are those of a fresh one
 * ({@link runCommand}); what a kept connection changes is only who pays the login:
 *
 * - a connection the machine closed or broke (a restart, an idle timeout of its sshd) is noticed
 *   and forgotten; a command it fails at once is tried again on a fresh login, so a dropped
 *   connection never costs a sample;
 * - a command cut short (its time, its output cap) ends its connection at once, as a fresh one
 *   would: the next command logs in again, under the login's own bound;
 * - a connection is only reused for the same address, user and pinned host key;
 * - at most `maxOpen` connections are kept (the least recently used goes first), none unused for
 *   longer than `idleMs`, and their sockets never keep the process alive.
 */
export class SshSessions {
  /** Kept connections by key, least recently used first (a Map keeps insertion order). */
  private readonly kept = new Map<string, Kept>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(private readonly limits: SshSessionLimits = DEFAULT_SESSION_LIMITS) {
    this.sweeper = setInterval(() => this.closeIdle(), Math.max(1000, Math.floor(limits.idleMs / 2))).unref();
  }

  /** Connections kept now. */
  get size(): number {
    return this.kept.size;
  }

  /**
   * Runs `command` for `key` on its kept connection, or on a fresh login (kept afterwards when
   * the command ended on its own). `loggedIn` says which. Throws an SshLoginError when a needed
   * login fails, and an Error when the command could not be started.
   */
  async exec(
    key: string,
    target: SshTarget,
    command: string,
    opts: SshOptions = {},
  ): Promise<SshExecResult & { loggedIn: boolean }> {
    const reused = this.take(key, target);
    if (reused) {
      let res: SshExecResult | undefined;
      try {
        res = await runCommand(reused.session, command, opts);
      } catch {
        res = undefined;
      }
      // Lost before the command ran to its end, or refused outright: the connection had gone
      // stale; a fresh login decides.
      if (res && res.cut !== 'connection_lost') {
        this.settle(key, reused, res);
        return { ...res, loggedIn: false };
      }
      closeSession(reused.session, true);
    }
    const session = await openSession(target, opts.timeoutMs ?? SSH_CONNECT_TIMEOUT_MS);
    const fresh: Kept = { session, target: targetOf(target, session), usedAt: Date.now(), closed: false };
    session.client.once('close', () => {
      fresh.closed = true;
      if (this.kept.get(key) === fresh) this.kept.delete(key);
    });
    let res: SshExecResult;
    try {
      res = await runCommand(session, command, opts);
    } catch (err) {
      closeSession(session, true);
      throw err;
    }
    this.settle(key, fresh, res);
    return { ...res, loggedIn: true };
  }

  /** Closes the connections of every key not in `keys` (rentals no longer watched). */
  retain(keys: ReadonlySet<string>): void {
    for (const [key, k] of this.kept) {
      if (keys.has(key)) continue;
      this.kept.delete(key);
      closeSession(k.session);
    }
  }

  /** Closes every kept connection and stops the idle sweep. */
  close(): void {
    clearInterval(this.sweeper);
    for (const k of this.kept.values()) closeSession(k.session);
    this.kept.clear();
  }

  /** The kept connection of `key` for this target, taken out while it runs a command; undefined when there is none fit. */
  private take(key: string, target: SshTarget): Kept | undefined {
    const k = this.kept.get(key);
    if (!k) return undefined;
    this.kept.delete(key);
    if (k.closed || !sameTarget(k.target, target)) {
      closeSession(k.session, true);
      return undefined;
    }
    k.session.sock.ref();
    return k;
  }

  /** After a command: a cut one ends its connection; otherwise the connection is kept, most recently used. */
  private settle(key: string, k: Kept, res: SshExecResult): void {
    if (res.cut !== null || k.closed) {
      closeSession(k.session, res.cut !== null);
      return;
    }
    const other = this.kept.get(key);
    if (other) closeSession(other.session);
    k.usedAt = Date.now();
    k.session.sock.unref();
    this.kept.set(key, k);
    while (this.kept.size > this.limits.maxOpen) {
      const [oldest, o] = this.kept.entries().next().value as [string, Kept];
      this.kept.delete(oldest);
      closeSession(o.session);
    }
  }

  private closeIdle(): void {
    const before = Date.now() - this.limits.idleMs;
    for (const [key, k] of this.kept) {
      // Least recently used first: the first one used since is where the idle ones end.
      if (k.usedAt > before) break;
      this.kept.delete(key);
      closeSession(k.session);
    }
  }
}

/** How many connections are kept, and for how long unused. */
export interface SshSessionLimits {
  maxOpen: number;
  idleMs: number;
}

/**
 * Enough for every rental one worker watches, and a little longer unused than the longest gap
 * between two idle samples (five minutes), so a watched rental's connection is still there at its
 * next sample.
 */
export const DEFAULT_SESSION_LIMITS: SshSessionLimits = { maxOpen: 20_000, idleMs: 6 * 60_000 };

interface Kept {
  session: SshSession;
  /** Where it is logged in, and the host key it was pinned to (the one it showed, when none was). */
  target: { host: string; port: number; user: string; hostKey: string };
  usedAt: number;
  closed: boolean;
}

function targetOf(target: SshTarget, session: SshSession): Kept['target'] {
  return { host: target.host, port: target.port, user: target.user, hostKey: session.hostKey };
}

/** The kept connection serves `target` when it is the same address and user, and the host key it showed is the one now pinned. */
function sameTarget(kept: Kept['target'], target: SshTarget): boolean {
  return (
    kept.host === target.host &&
    kept.port === target.port &&
    kept.user === target.user &&
    (!target.hostKey || target.hostKey === kept.hostKey)
  );
}
