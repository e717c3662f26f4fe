/**
 * The one rule for the ids of this service's rows (accounts, keys, rentals, deployments, checkouts,
 * webhook endpoints and deliveries): UUIDs, written and stored in lower case. The columns compare
 * under a binary collation, so an id that comes in from outside (a path, a command, a callback,
 * a page's URL) is normalised here once, where it enters, and nothing past that point changes
 * its case or tests its shape again.
 */

/** A UUID as this service writes it, for composing route, callback and regex patterns. */
export const UUID_PATTERN = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';

const UUID_ANY_CASE = new RegExp(`^${UUID_PATTERN}$`, 'i');

/** Whether `text` is a UUID, in either case. */
export function isUuid(text: string): boolean {
  return UUID_ANY_CASE.test(text);
}

/** The stored form of an id given in either case; null when `raw` is not a UUID. */
export function normaliseId(raw: string): string | null {
  return isUuid(raw) ? raw.toLowerCase() : null;
}

/**
 * An id a request names a row by (a path segment, a body field), in its stored form. Text that is
 * not a UUID is kept as given: it names no row, so the lookup finds nothing and the caller answers
 * as it does for an id of another account (404, or its own refusal).
 */
export function lookupId(raw: string): string {
  return normaliseId(raw) ?? raw;
}
