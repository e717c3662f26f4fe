import assert from 'node:assert/strict';
import { isUuid, lookupId, normaliseId, UUID_PATTERN } from '../../src/ids.js';

const ID = '3f6c2a9e-8d41-4b7a-9c2e-5d1f0a7b6e42';

describe('the one rule for ids (src/ids.ts)', () => {
  // [given, its stored form, or null when it is not a UUID]
  const CASES: [string, string | null][] = [
    [ID, ID],
    [ID.toUpperCase(), ID],
    ['3F6c2A9e-8D41-4b7A-9c2E-5d1F0a7B6e42', ID],
    ['00000000-0000-0000-0000-000000000000', '00000000-0000-0000-0000-000000000000'],
    ['', null],
    ['abc', null],
    [` ${ID}`, null],
    [`${ID} `, null],
    [`${ID}\n`, null],
    [ID.replaceAll('-', ''), null],
    [`{${ID}}`, null],
    [ID.slice(0, -1), null],
    [`${ID}0`, null],
    [ID.replace('3f6c2a9e', '3f6c2a9g'), null],
    ['3f6c2a9e8-d41-4b7a-9c2e-5d1f0a7b6e42', null],
    ['-'.repeat(36), null],
    ['3f6c2a9e-8d41-4b7a-9c2e-5d1f0a7b6e4２', null],
  ];

  for (const [given, stored] of CASES) {
    it(`${JSON.stringify(given)} is ${stored === null ? 'not a UUID' : 'normalised to its stored form'}`, () => {
      assert.equal(isUuid(given), stored !== null);
      assert.equal(normaliseId(given), stored);
      // What names no row is looked up as given, and finds nothing.
      assert.equal(lookupId(given), stored ?? given);
    });
  }

  it('composes into route and callback patterns that match the stored form only', () => {
    const callback = new RegExp(`^rv:(${UUID_PATTERN})$`);
    assert.equal(callback.exec(`rv:${ID}`)?.[1], ID);
    assert.equal(callback.exec(`rv:${ID.toUpperCase()}`), null);
    assert.equal(callback.exec(`rv:${ID}x`), null);
  });
});
