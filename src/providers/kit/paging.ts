import { ProviderApiError } from '../provider-http.js';
import type { ProviderDrift } from './provider-drift.js';

/**
 * One page as a plugin read it: its items and the cursor of the next page, or `null` when the
 * page said it was the last. A page that cannot say either must throw (see {@link readCursor}).
 */
export interface Page<T> {
  items: T[];
  next: string | null;
}

/** A listing that followed every cursor to a page that said it was the last. */
export interface CompleteList<T> {
  items: T[];
  /** Always true: an incomplete listing throws instead of being returned. */
  complete: true;
  pages: number;
}

/** Default ceiling of pages per listing: a server repeating or inventing cursors must not loop us forever. */
export const DEFAULT_MAX_PAGES = 400;

/** The page a cursor came from, so an unreadable one is reported with the page's shape. */
export interface PageOrigin {
  drift: ProviderDrift;
  /** The listing call, as a template (`GET /v2/pods`). */
  where: string;
  /** The whole page as it was answered. */
  page: unknown;
}

/**
 * A page's next cursor: `null` when the value says "no more" (absent, null or empty), the string
 * otherwise. Anything else is a malformed page and throws `bad_response`, since reading it as
 * "no more" would end the listing early and make instances past it look absent; with `origin`,
 * the page's shape goes to the drift report first (`unknown_page_shape`).
 */
export function readCursor(value: unknown, what: string, origin?: PageOrigin): string | null {
  if (value === undefined || value === null || value === '') return null;
  if (typeof value === 'string') return value;
  origin?.drift.unknownPageShape(origin.where, origin.page);
  throw new ProviderApiError('bad_response', `${what}: the next-page cursor is not a string`, 200);
}

/**
 * Reads every page of a listing, starting without a cursor and following each page's `next`.
 * Returns only when a page said it was the last. A page that fails (`fetchPage` throws), a cursor
 * that repeats, or more than `maxPages` pages make the whole listing throw: callers decide
 * "absent" from this list, so they must never see a partial one.
 */
export async function listAllPages<T>(opts: {
  what: string;
  fetchPage: (cursor: string | undefined) => Promise<Page<T>>;
  maxPages?: number;
}): Promise<CompleteList<T>> {
  const max = opts.maxPages ?? DEFAULT_MAX_PAGES;
  const items: T[] = [];
  const seen = new Set<string>();
  let cursor: string | undefined;
  for (let page = 1; page <= max; page++) {
    const got = await opts.fetchPage(cursor);
    items.push(...got.items);
    if (got.next === null) return { items, complete: true, pages: page };
    if (seen.has(got.next))
      throw new ProviderApiError('bad_response', `${opts.what}: the next-page cursor does not advance`, 200);
    seen.add(got.next);
    cursor = got.next;
  }
  throw new ProviderApiError('bad_response', `${opts.what}: more than ${max} pages; the listing is incomplete`, 200);
}
