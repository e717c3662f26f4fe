import assert from 'node:assert/strict';
import { sign } from 'node:crypto';
import { verifyReceipt } from '../../clients/sdk/src/receipts.js';
import { canonicalJson, signedReceiptProblem } from '../../src/vocabulary/receipts.js';
import { receiptKeyPair, sampleReceipt } from '../helpers/receipts.js';

const pair = receiptKeyPair;
const receipt = (keyId: string) => sampleReceipt(keyId);

describe('teardown receipts: canonical form and offline verification', () => {
  it('writes the canonical form: keys sorted at every depth, no whitespace, arrays in order, JSON escapes', () => {
    assert.equal(
      canonicalJson({ b: 1, a: { d: [3, { z: null, y: true }], c: 'é"\n' }, A: -0, aa: 1.5 }),
      '{"A":0,"a":{"c":"é\\"\\n","d":[3,{"y":true,"z":null}]},"aa":1.5,"b":1}',
    );
    // Code-unit order, as RFC 8785 sorts: upper case before lower, shorter prefix first.
    assert.equal(canonicalJson({ b: 0, B: 0, ab: 0, a: 0 }), '{"B":0,"a":0,"ab":0,"b":0}');
    for (const bad of [undefined, NaN, Infinity, () => 1, { a: undefined }]) assert.throws(() => canonicalJson(bad));
    // Parsing a canonical form and writing it again gives the same bytes.
    const r = receipt('rk_x');
    assert.equal(canonicalJson(JSON.parse(canonicalJson(r))), canonicalJson(r));
  });

  it('verifies what the service signs with the published key, as served or inside the API answer', () => {
    const k = pair();
    const r = receipt(k.id);
    const signed = { receipt: r, signature: { alg: 'Ed25519', keyId: k.id, value: k.signer.sign(r) } };
    const check = verifyReceipt(signed, { keys: [k.key] });
    assert.equal(check.valid, true, JSON.stringify(check));
    assert.equal(check.valid && check.key.kid, k.id);
    assert.equal(verifyReceipt({ data: signed, meta: { requestId: 'req_1' } }, { keys: [k.key] }).valid, true);
    // The signature is plain Ed25519 over the canonical bytes: what any library or openssl checks.
    assert.equal(signed.signature.value, sign(null, Buffer.from(canonicalJson(r)), k.privateKey).toString('base64url'));
  });

  it('fails when any one byte of the receipt changes, or of the signature', () => {
    const k = pair();
    const r = receipt(k.id);
    const value = k.signer.sign(r);
    const body = Buffer.from(canonicalJson(r), 'utf8');
    let tried = 0;
    for (let i = 0; i < body.length; i++) {
      const changed = Buffer.from(body);
      changed[i] = changed[i] === 0x30 ? 0x31 : 0x30;
      let doc: unknown;
      try {
        doc = JSON.parse(changed.toString('utf8'));
      } catch {
        continue; // No longer JSON: no reader could take it for the receipt.
      }
      tried++;
      const check = verifyReceipt(
        { receipt: doc, signature: { alg: 'Ed25519', keyId: k.id, value } },
        { keys: [k.key] },
      );
      assert.equal(
        check.valid,
        false,
        `byte ${i} changed to ${String.fromCharCode(changed[i])}: ${changed.toString()}`,
      );
    }
    assert.ok(tried > body.length / 2, `only ${tried} of ${body.length} changes parsed`);
    const sig = Buffer.from(value, 'base64url');
    for (let i = 0; i < sig.length; i++) {
      const bad = Buffer.from(sig);
      bad[i] ^= 0x01;
      const check = verifyReceipt(
        { receipt: r, signature: { alg: 'Ed25519', keyId: k.id, value: bad.toString('base64url') } },
        { keys: [k.key] },
      );
      assert.deepEqual(check.valid ? 'valid' : check.problem, 'bad_signature', `signature byte ${i}`);
    }
  });

  it('names an unknown key id, another key, and malformed documents and key sets, in one line each', () => {
    const k = pair();
    const other = pair();
    const r = receipt(k.id);
    const signed = { receipt: r, signature: { alg: 'Ed25519', keyId: k.id, value: k.signer.sign(r) } };
    const problem = (doc: unknown, keys: unknown = { keys: [k.key] }) => {
      const c = verifyReceipt(doc, keys);
      assert.equal(c.valid, false);
      assert.doesNotMatch(c.valid ? '' : c.reason, /\n/);
      return c.valid ? null : [c.problem, c.reason];
    };
    assert.deepEqual(problem(signed, { keys: [other.key] }), [
      'unknown_key',
      `unknown key id ${k.id}: no key of the set signed this receipt`,
    ]);
    // Another key published under this key's id: the signature is not its.
    assert.equal(problem(signed, { keys: [{ ...other.key, kid: k.id }] })?.[0], 'bad_signature');
    assert.equal(problem(signed, { nope: [] })?.[0], 'malformed');
    assert.equal(problem(signed, { keys: [{ ...k.key, crv: 'P-256' }] })?.[0], 'malformed');
    assert.equal(problem(signed, { keys: [{ ...k.key, x: 'AAAA' }] })?.[0], 'malformed');
    for (const [doc, says] of [
      [null, /not a JSON object/],
      [{ receipt: r }, /no "signature"/],
      [{ ...signed, signature: { ...signed.signature, alg: 'HS256' } }, /alg is "HS256"/],
      [{ ...signed, signature: { ...signed.signature, value: 'short' } }, /64 bytes of base64url/],
      [{ ...signed, signature: { ...signed.signature, keyId: other.id } }, /keyId and signature.keyId differ/],
      [{ ...signed, receipt: { ...r, version: 2 } }, /version 2 is not 1/],
      [{ ...signed, receipt: { ...r, type: 'other' } }, /receipt.type/],
    ] as const) {
      const p = problem(doc);
      assert.equal(p?.[0], 'malformed', String(p));
      assert.match(String(p?.[1]), says);
    }
    assert.equal(signedReceiptProblem(signed), null);
  });
});
