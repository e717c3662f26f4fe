import { createHash } from 'node:crypto';
import { IDEMPOTENCY_KEY_HINT } from '../../vocabulary/access-hints.js';
import type { Clock } from '../../clock.js';
import { AppError } from '../../errors/app-error.js';
import { isUuid } from '../../ids.js';
import type { IdempotencyRepository } from './idempotency.repository.js';

/*
 * The Idempotency-Key protocol, the same for every create (signup, top-ups, card checkout, agent
 * keys, rentals): validate the header, hash the request, then claim the key in the transaction
 * that creates the resource, writing the resource's id before it commits. A concurrent request
 * with the same key waits on the claim until that transaction ends, then replays what it made
 * (or claims the key itself after a rollback). So no request ever finds a key claimed and its
 * work unfinished: there is no "in progress" answer, only a wait.
 */

/** One use of an Idempotency-Key: where the key lives, the key, and the hash of what was asked. */
export interface IdempotentRequest {
  /** An endpoint, and the account where there is one: keys of different scopes never meet. */
  readonly scope: string;
  readonly key: string;
  readonly hash: string;
}

/** What a claim found: the key was free (this request does the work) or used by this same request. */
export type Claim = { kind: 'new'; recordId: string } | { kind: 'replay'; resourceId: string };

/**
 * Validates an Idempotency-Key header; a missing or malformed key is a 400 that says what the
 * header is and how to make one (docs/api.md, Idempotency).
 */
export function requireIdempotencyKey(value: string | undefined, opts: { uuid?: boolean } = {}): string {
  if (value === undefined || value === '')
    throw new AppError('INVALID_REQUEST', `The Idempotency-Key header is required. ${IDEMPOTENCY_KEY_HINT}`);
  if (opts.uuid) {
    if (!isUuid(value))
      throw new AppError('INVALID_REQUEST', `The Idempotency-Key header must be a UUID here. ${IDEMPOTENCY_KEY_HINT}`);
  } else if (value.length > 128 || /[\x00-\x1f\x7f]/.test(value)) {
    // Node has already refused what HTTP forbids in a header; control characters are all that is left to rule out.
    throw new AppError(
      'INVALID_REQUEST',
      `The Idempotency-Key header must be 1 to 128 printable characters. ${IDEMPOTENCY_KEY_HINT}`,
    );
  }
  return value;
}

/**
 * The request a validated key (see {@link requireIdempotencyKey}) stands for in `scope`. `body`
 * is what makes two requests the same: its hash ignores field order and undefined fields.
 */
export function idempotentRequest(scope: string, key: string, body: unknown): IdempotentRequest {
  return { scope, key, hash: requestHash(body) };
}

function requestHash(body: unknown): string {
  const canon = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(canon);
    if (v && typeof v === 'object') {
      return Object.fromEntries(
        Object.keys(v as object)
          .sort()
          .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
          .map((k) => [k, canon((v as Record<string, unknown>)[k])]),
      );
    }
    return v;
  };
  return createHash('sha256')
    .update(JSON.stringify(canon(body ?? {})), 'utf8')
    .digest('hex');
}

function conflict(): AppError {
  return new AppError(
    'IDEMPOTENCY_CONFLICT',
    'This Idempotency-Key was already used with a different request body, so nothing was done. A new request needs a new Idempotency-Key; to retry the first request, send it again with its body unchanged.',
  );
}

function resourceOf(record: { scope: string; idemKey: string; resourceId: string | null }): string {
  // Every claim commits with its resource, so a record without one is corrupt data, not a state.
  if (record.resourceId === null)
    throw new Error(`idempotency record ${record.scope}/${record.idemKey} has no resource`);
  return record.resourceId;
}

/**
 * Claims the request's key inside the caller's transaction, with the id of the resource the
 * caller is about to create in that same transaction: one statement, plus a read when the key
 * was taken. A changed body is IDEMPOTENCY_CONFLICT. Rental admission issues this in its first
 * round trip; other creates use {@link claimOrReplay}.
 */
export async function claimIdempotencyKey(
  records: IdempotencyRepository,
  clock: Clock,
  request: IdempotentRequest,
  resourceId: string,
): Promise<Claim> {
  return claim(records, clock, request, resourceId);
}

async function claim(
  records: IdempotencyRepository,
  clock: Clock,
  request: IdempotentRequest,
  resourceId: string | null,
): Promise<Claim> {
  const inserted = await records.insert({
    scope: request.scope,
    idemKey: request.key,
    requestHash: request.hash,
    resourceId,
    createdAt: clock.now(),
  });
  if (inserted) return { kind: 'new', recordId: inserted.id };
  const record = await records.find(request.scope, request.key);
  if (!record) throw new Error(`idempotency record ${request.scope}/${request.key} was neither inserted nor found`);
  if (record.requestHash !== request.hash) throw conflict();
  return { kind: 'replay', resourceId: resourceOf(record) };
}

/** The two ends of a create under an Idempotency-Key. */
export interface IdempotentSteps<T> {
  /** Does the work in the caller's transaction; `resourceId` is what a replay is given. */
  create(): Promise<{ resourceId: string; result: T }>;
  /** The answer for a repeat of a request that committed, from what it created. */
  replay(resourceId: string): Promise<T> | T;
}

/**
 * Claims the request's key inside the caller's transaction, then creates (a new key: the record
 * gets the created resource's id before the transaction commits) or replays.
 */
export async function claimOrReplay<T>(
  records: IdempotencyRepository,
  clock: Clock,
  request: IdempotentRequest,
  steps: IdempotentSteps<T>,
): Promise<T> {
  const claimed = await claim(records, clock, request, null);
  if (claimed.kind === 'replay') return steps.replay(claimed.resourceId);
  const created = await steps.create();
  await records.setResource(claimed.recordId, created.resourceId);
  return created.result;
}

/**
 * Outside any transaction: the resource an earlier, committed use of the request's key created,
 * or null when the key is unused. A different body is IDEMPOTENCY_CONFLICT. For checks that a
 * replay must skip (admission of a card order, the signup rate limit); the claim decides again.
 */
export async function priorUse(records: IdempotencyRepository, request: IdempotentRequest): Promise<string | null> {
  const record = await records.find(request.scope, request.key);
  if (!record) return null;
  if (record.requestHash !== request.hash) throw conflict();
  return resourceOf(record);
}
