import assert from 'node:assert/strict';
import { keyName } from '../../src/modules/keys/key-name.js';

describe('agent and key names', () => {
  it('keeps ordinary names, scripts and emoji (with their variation selectors) as given', () => {
    for (const name of ['nightly <trainer>', 'Ada Lovelace', 'متدرب', '训练器', 'trainer ❤️', 'Zoë — v2'])
      assert.equal(keyName(` ${name} `), name);
  });
});
