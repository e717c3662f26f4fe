import type { Logger } from '../../logger.js';
import { ProviderApiError, type SharedRead } from '../provider-http.js';
import type { CreateResult } from '../provider.js';

/** A create outcome other than `created`. */
export type CreateFailure = Exclude<CreateResult, { kind: 'created' }>;

/**
 * The one verdict for "the label lookup before a create failed": nothing was sent, so nothing
 * exists from this attempt, but we cannot tell whether an earlier attempt's instance does.
 * - rate limited: `throttled` (ask again with the same label after the wait);
 * - our key or our request refused (`auth`, `request`): `rejected`, asking again will not help;
 * - anything else (timeout, 5xx, an unreadable answer): `ambiguous`, so the host resolves it by
 *   label before anything else is created.
 */
export function labelLookupFailure(label: string, err: unknown): CreateFailure {
  const reason = `could not check for an existing instance labelled ${label}: ${(err as Error).message}`;
  if (!(err instanceof ProviderApiError)) return { kind: 'ambiguous', reason };
  if (err.errorClass === 'rate_limited') return { kind: 'throttled', reason, retryAfterMs: err.retryAfterMs ?? 1000 };
  if (err.errorClass === 'auth' || err.errorClass === 'request')
    return { kind: 'rejected', reason, errorClass: err.errorClass };
  return { kind: 'ambiguous', reason };
}

/** How a plugin reads its instances for {@link pickByLabel}. */
export interface LabelledSpec<T> {
  /** Our label of an instance ('' or undefined when it carries none). */
  labelOf(item: T): string | undefined;
  /** False for instances that no longer count (terminated ones a list still shows). Default: all count. */
  live?(item: T): boolean;
  /** Orders candidates oldest first; the oldest is the one the first create answered with. */
  older?(a: T, b: T): number;
}

/**
 * The instance carrying `label` in a complete list, or null. Should a race ever have made two, the
 * oldest is returned and the duplicate logged; the reconciler destroys the other.
 */
export function pickByLabel<T>(
  items: readonly T[],
  label: string,
  spec: LabelledSpec<T> & { logger?: Logger; idOf?: (item: T) => string },
): T | null {
  const hits = items.filter((i) => spec.labelOf(i) === label && (spec.live?.(i) ?? true));
  if (hits.length > 1)
    spec.logger?.warn(
      { label, ids: hits.map((i) => spec.idOf?.(i) ?? '?') },
      'several instances carry one label; using the oldest',
    );
  if (spec.older) hits.sort(spec.older);
  return hits[0] ?? null;
}

/**
 * The list-then-get read of one instance: the shared list answers most polls with one call; an id
 * missing from it is asked for directly, since a list older than a create (or a destroy by another
 * process) must never read as gone. `getOne` answers null only when the cloud says the id is gone.
 */
export async function listThenGet<T>(
  list: SharedRead<T[]>,
  id: string,
  idOf: (item: T) => string,
  getOne: (id: string) => Promise<T | null>,
): Promise<T | null> {
  const listed = (await list.get()).find((i) => idOf(i) === id);
  return listed ?? getOne(id);
}

/** The steps of one create with a label, for {@link createWithLabel}. */
export interface CreateSteps<T> {
  label: string;
  /** Finds an instance already carrying the label (an earlier attempt, a racing create); reads a complete list. */
  lookup(): Promise<T | null>;
  /** The answer when one exists: normally `created` with its id. */
  adopt(existing: T): Promise<CreateResult> | CreateResult;
  /**
   * Sends the create and maps its answer through the plugin's error table. A throw means no answer
   * arrived (timeout, dropped connection): the instance may exist, so it becomes `ambiguous`.
   */
  send(): Promise<CreateResult>;
  /** Called with every failure (not with `created`), e.g. to drop state kept only while an instance may exist. */
  settle?(result: CreateFailure): void;
}

/**
 * The common create flow: look the label up, adopt what exists, else send one create. Every
 * plugin's create goes through this (inside its {@link LabelLock}), so a retried or racing create
 * never makes a second instance, and a failed lookup gets the same verdict everywhere.
 */
export async function createWithLabel<T>(steps: CreateSteps<T>): Promise<CreateResult> {
  const settle = (r: CreateResult) => {
    if (r.kind !== 'created') steps.settle?.(r);
    return r;
  };
  let existing: T | null;
  try {
    existing = await steps.lookup();
  } catch (err) {
    return settle(labelLookupFailure(steps.label, err));
  }
  if (existing !== null) return steps.adopt(existing);
  let result: CreateResult;
  try {
    result = await steps.send();
  } catch (err) {
    result = { kind: 'ambiguous', reason: (err as Error).message };
  }
  return settle(result);
}
