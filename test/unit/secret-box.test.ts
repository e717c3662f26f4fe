import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { SecretBox } from '../../src/modules/credentials/secret-box.js';

describe(SecretBox.name, () => {
  const key = randomBytes(32);
  const sut = new SecretBox(new Map([['k1', key]]), 'k1');

  it('round-trips a secret bound to its row', () => {
    const { ciphertext, keyId } = sut.seal('-----BEGIN OPENSSH PRIVATE KEY-----', 'row-1');
    assert.equal(keyId, 'k1');
    assert.ok(!ciphertext.toString('utf8').includes('OPENSSH'));
    assert.equal(sut.open(ciphertext, keyId, 'row-1'), '-----BEGIN OPENSSH PRIVATE KEY-----');
  });

  it('refuses another row, an altered byte, or another key', () => {
    const { ciphertext } = sut.seal('secret', 'row-1');
    assert.throws(() => sut.open(ciphertext, 'k1', 'row-2'));
    const altered = Buffer.from(ciphertext);
    altered[altered.length - 1] ^= 1;
    assert.throws(() => sut.open(altered, 'k1', 'row-1'));
    const other = new SecretBox(new Map([['k1', randomBytes(32)]]), 'k1');
    assert.throws(() => other.open(ciphertext, 'k1', 'row-1'));
    assert.throws(() => sut.open(ciphertext, 'k2', 'row-1'));
  });

  it('opens old ciphertexts after rotation to a new current key', () => {
    const { ciphertext } = sut.seal('secret', 'row-1');
    const rotated = new SecretBox(
      new Map([
        ['k1', key],
        ['k2', randomBytes(32)],
      ]),
      'k2',
    );
    assert.equal(rotated.open(ciphertext, 'k1', 'row-1'), 'secret');
    assert.equal(rotated.seal('x', 'r').keyId, 'k2');
  });
});
