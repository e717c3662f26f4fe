import { readFileSync } from 'node:fs';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { Config } from '../config.js';
import { AppError } from '../errors/app-error.js';
import type { Logger } from '../logger.js';
import { addressBucket, clientAddress } from './client-address.js';

/**
 * Seconds a refused stream or waiting read is told to wait: a waiting read ends within 30 s and a
 * closed stream frees its place at once, so a few seconds is enough to find one free.
 */
export const PUSH_RETRY_AFTER_SECONDS = 5;
const CLOSE_ONE = `Close one (or let a waiting read end) and try again in ${PUSH_RETRY_AFTER_SECONDS} s.`;

/** Descriptors kept free of streams and waiting reads: ordinary requests, the database pool, logs, listeners. */
export const PUSH_FILE_RESERVE = 256;
/** The most streams and waiting reads a process holds unless PUSH_MAX_OPEN says otherwise (each costs memory). */
export const PUSH_DEFAULT_MAX_OPEN = 4096;
/** The open-file limit assumed where it cannot be read (the usual soft limit). */
const ASSUMED_FILE_LIMIT = 1024;

/** How many event streams and waiting reads may be open at once, in one api process. */
export interface PushBounds {
  perKey: number;
  perAddress: number;
  /** All callers together: the process-wide ceiling, below the open-file limit. */
  open: number;
}

/**
 * The places of the long-lived requests (event streams and waiting reads) of one api process.
 * Each takes two: one of its client address while its connection is open (taken before the key is
 * read), and one of its key while it listens to the event hub. A waiting read whose client went
 * away keeps listening until its wait ends (at most 30 s), so the two are counted apart, and each
 * count in all stays under the process-wide ceiling. The counts are of what is open now, not a
 * rate. Kept in memory, since what they protect (descriptors, memory) is the process's own; a
 * count of zero leaves no entry behind, so a map is as large as the keys and addresses holding places.
 */
export class PushLimits {
  private readonly byKey = new Map<string, number>();
  private readonly byAddress = new Map<string, number>();
  private total = 0;
  private listening = 0;

  constructor(readonly bounds: PushBounds) {}

  /** Streams and waiting reads holding an address place now (their connections are open). */
  get open(): number {
    return this.total;
  }

  /** Streams and waiting reads holding a key place now (they listen to the hub). */
  get listeners(): number {
    return this.listening;
  }

  /** How many keys and addresses hold places now (both fall to zero when every stream and wait has ended). */
  get tracked(): { keys: number; addresses: number } {
    return { keys: this.byKey.size, addresses: this.byAddress.size };
  }

  /**
   * Takes a place for a stream or waiting read from client address `address` (its bucket), under
   * the process-wide ceiling: before the key is read, so a refused request costs no query. Answers
   * the release (idempotent); throws 429 RATE_LIMITED with Retry-After over either bound.
   */
  enterAddress(address: string): () => void {
    if (this.total >= this.bounds.open) throw this.full();
    const bucket = addressBucket(address);
    take(this.byAddress, bucket, this.bounds.perAddress, () =>
      refusal(
        `This address already holds ${this.bounds.perAddress} event streams and waiting reads, the most allowed at once. ${CLOSE_ONE}`,
      ),
    );
    this.total++;
    return once(() => {
      this.total--;
      give(this.byAddress, bucket);
    });
  }

  /** Takes a place for a stream or waiting read of key `keyId`; the release as {@link enterAddress}'s. */
  enterKey(keyId: string): () => void {
    if (this.listening >= this.bounds.open) throw this.full();
    take(this.byKey, keyId, this.bounds.perKey, () =>
      refusal(
        `This key already holds ${this.bounds.perKey} event streams and waiting reads, the most allowed at once. ${CLOSE_ONE}`,
      ),
    );
    this.listening++;
    return once(() => {
      this.listening--;
      give(this.byKey, keyId);
    });
  }

  private full(): AppError {
    return refusal(
      `This server holds the most event streams and waiting reads it takes at once (${this.bounds.open}). Try again in ${PUSH_RETRY_AFTER_SECONDS} s, or read without waitFor meanwhile.`,
    );
  }
}

function take(counts: Map<string, number>, name: string, limit: number, refused: () => AppError): void {
  const n = counts.get(name) ?? 0;
  if (n >= limit) throw refused();
  counts.set(name, n + 1);
}

function give(counts: Map<string, number>, name: string): void {
  const n = (counts.get(name) ?? 0) - 1;
  if (n > 0) counts.set(name, n);
  else counts.delete(name);
}

function once(fn: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    fn();
  };
}

function refusal(message: string): AppError {
  return new AppError('RATE_LIMITED', message, { 'Retry-After': String(PUSH_RETRY_AFTER_SECONDS) });
}

/**
 * The soft open-file limit of this process (RLIMIT_NOFILE, as Node raised it at start), from
 * /proc/self/limits: Infinity when it says "unlimited", null where there is no such file.
 */
export function openFileLimit(read: () => string = () => readFileSync('/proc/self/limits', 'utf8')): number | null {
  let text: string;
  try {
    text = read();
  } catch {
    return null;
  }
  const m = /^Max open files\s+(\d+|unlimited)\s/m.exec(text);
  if (!m) return null;
  return m[1] === 'unlimited' ? Number.POSITIVE_INFINITY : Number(m[1]);
}

/**
 * The process-wide ceiling: PUSH_MAX_OPEN when set, else half the open-file limit and at most
 * {@link PUSH_DEFAULT_MAX_OPEN}; in every case at least {@link PUSH_FILE_RESERVE} files of the
 * limit stay free, so streams never take the descriptors /healthz and ordinary requests need.
 */
export function pushCeiling(
  configured: number | undefined,
  fileLimit: number | null,
): { open: number; lowered: boolean } {
  const limit = fileLimit ?? ASSUMED_FILE_LIMIT;
  const most = Math.max(1, limit - PUSH_FILE_RESERVE);
  const wanted = configured ?? Math.min(PUSH_DEFAULT_MAX_OPEN, Math.floor(limit / 2));
  return { open: Math.max(1, Math.min(wanted, most)), lowered: configured !== undefined && configured > most };
}

/** The configured bounds (PUSH_MAX_*), the ceiling held against this process's open-file limit. */
export function pushLimits(push: Config['push'], logger?: Logger, fileLimit = openFileLimit()): PushLimits {
  const { open, lowered } = pushCeiling(push.open, fileLimit);
  if (lowered)
    logger?.warn(
      { configured: push.open, open, fileLimit },
      `PUSH_MAX_OPEN leaves too few of the ${fileLimit} open files for other requests; holding at most ${open}`,
    );
  return new PushLimits({ perKey: push.perKey, perAddress: push.perAddress, open });
}

/**
 * The routes a waiting read is served on, as Express names them: {@link pushPlaces} is mounted on
 * them so that Express matches a path as it matches the route itself (case, trailing slash).
 */
export const WAITING_READ_ROUTES = ['/api/v1/rentals/:id', '/api/v1/deployments/:id'];

/** Whether a request to one of {@link WAITING_READ_ROUTES} waits (`waitFor` given, valid or not: it is answered soon either way). */
export function isWaitingRead(req: Request): boolean {
  return req.query.waitFor !== undefined;
}

/**
 * Takes an address place for each request `wanted` picks (mounted on the waiting-read routes, so
 * Express matches their paths as it matches the routes themselves), released when the answer is
 * done or the client goes. A refusal closes the connection, so a flood of refused requests does
 * not keep their descriptors open either.
 */
export function pushPlaces(limits: PushLimits, wanted: (req: Request) => boolean): RequestHandler {
  return (req: Request, res: Response, next: NextFunction) => {
    if (!wanted(req)) return next();
    let release: () => void;
    try {
      release = enterFrom(limits, req, res);
    } catch (err) {
      return next(err);
    }
    res.once('close', release);
    next();
  };
}

/** Takes the address place of `req` (see {@link pushPlaces}); on refusal, marks the answer to close its connection. */
export function enterFrom(limits: PushLimits, req: Request, res: Response): () => void {
  try {
    return limits.enterAddress(clientAddress(req));
  } catch (err) {
    res.setHeader('Connection', 'close');
    throw err;
  }
}
