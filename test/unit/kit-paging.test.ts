import assert from 'node:assert/strict';
import { listAllPages, readCursor, type Page } from '../../src/providers/kit/paging.js';
import { ProviderApiError } from '../../src/providers/provider-http.js';

/** A server's pages as a map from cursor ('' = first page) to the page. */
function pages(map: Record<string, Page<number> | Error>) {
  const asked: (string | undefined)[] = [];
  return {
    asked,
    fetchPage: async (cursor: string | undefined) => {
      asked.push(cursor);
      const p = map[cursor ?? ''];
      if (p instanceof Error) throw p;
      if (!p) throw new Error(`no page ${cursor}`);
      return p;
    },
  };
}

const isClass = (cls: string) => (e: unknown) => e instanceof ProviderApiError && e.errorClass === cls;

describe('kit: paging', () => {
  it('follows cursors to the page that says it is the last, and marks the list complete', async () => {
    const p = pages({ '': { items: [1, 2], next: 'a' }, a: { items: [3], next: 'b' }, b: { items: [4], next: null } });
    const list = await listAllPages({ what: 'acme GET /things', fetchPage: p.fetchPage });
    assert.deepEqual(list, { items: [1, 2, 3, 4], complete: true, pages: 3 });
    assert.deepEqual(p.asked, [undefined, 'a', 'b']);
  });

  it('a single page without a cursor is a complete list', async () => {
    const list = await listAllPages({ what: 'x', fetchPage: pages({ '': { items: [], next: null } }).fetchPage });
    assert.deepEqual(list, { items: [], complete: true, pages: 1 });
  });

  it('refuses an incomplete list: a failed later page makes the whole listing throw', async () => {
    const failure = new ProviderApiError('unavailable', 'acme GET /things: 503');
    const p = pages({ '': { items: [1], next: 'a' }, a: failure });
    await assert.rejects(listAllPages({ what: 'x', fetchPage: p.fetchPage }), (e) => e === failure);
  });

  it('a cursor that repeats is a malformed listing, not the end of it', async () => {
    const p = pages({ '': { items: [1], next: 'a' }, a: { items: [2], next: 'a' } });
    await assert.rejects(
      listAllPages({ what: 'acme GET /things', fetchPage: p.fetchPage }),
      (e: Error) => isClass('bad_response')(e) && /does not advance/.test(e.message),
    );
  });

  it('stops at the page cap with an error', async () => {
    let n = 0;
    const fetchPage = async () => ({ items: [n], next: `c${++n}` });
    await assert.rejects(
      listAllPages({ what: 'acme GET /things', fetchPage, maxPages: 5 }),
      (e: Error) => isClass('bad_response')(e) && /more than 5 pages/.test(e.message),
    );
    assert.equal(n, 5);
  });

  it('reads a cursor: absent, null or empty ends the listing; a non-string is malformed', () => {
    assert.equal(readCursor(undefined, 'x'), null);
    assert.equal(readCursor(null, 'x'), null);
    assert.equal(readCursor('', 'x'), null);
    assert.equal(readCursor('tok', 'x'), 'tok');
    assert.throws(() => readCursor(42, 'acme GET /things'), isClass('bad_response'));
    assert.throws(() => readCursor({ next: 'a' }, 'x'), isClass('bad_response'));
  });
});
