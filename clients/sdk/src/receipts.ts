import { createPublicKey, verify } from 'node:crypto';
import type { components } from './generated/openapi.js';
import {
  canonicalJson,
  RECEIPT_SIGNATURE_ALG,
  signedReceiptProblem,
  type ReceiptKey,
} from '../../../src/vocabulary/receipts.js';

/** A teardown receipt and its signature, as `GET /api/v1/rentals/{id}/receipt` serves it (its `data`). */
export type SignedReceipt = components['schemas']['SignedReceiptDto'];
/** The signed facts of one verified teardown. */
export type TeardownReceipt = components['schemas']['TeardownReceiptDto'];

/**
 * Why a receipt did not verify: `malformed` (not a signed receipt of a version this SDK reads, or
 * an unusable key set), `unknown_key` (no key of the set has its key id), `bad_signature` (the
 * signature does not match the receipt: it was changed, or signed by another key).
 */
export type ReceiptProblem = 'malformed' | 'unknown_key' | 'bad_signature';

/** The outcome of {@link verifyReceipt}: the receipt and the key that signed it, or why not, in one line. */
export type ReceiptCheck =
  | { valid: true; receipt: TeardownReceipt; key: ReceiptKey }
  | { valid: false; problem: ReceiptProblem; reason: string };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The signed receipt in `doc`: a saved `data` (`{ receipt, signature }`) or the whole answer of the
 * receipt route (`{ data: { receipt, signature }, meta }`).
 */
export function signedReceiptIn(doc: unknown): unknown {
  return isObject(doc) && isObject(doc.data) && 'receipt' in doc.data ? doc.data : doc;
}

/**
 * Checks a teardown receipt offline: its Ed25519 signature over the receipt's canonical form
 * (keys sorted, no whitespace, UTF-8; docs/teardown-receipts.md) against the key of its key id in
 * `keys` (the service's `/.well-known/gpr-receipt-keys.json`, fetched or saved). Retired keys
 * verify what they signed. Never throws on bad input: every failure is a {@link ReceiptCheck}.
 */
export function verifyReceipt(doc: unknown, keys: unknown): ReceiptCheck {
  const signed = signedReceiptIn(doc);
  const problem = signedReceiptProblem(signed);
  if (problem) return { valid: false, problem: 'malformed', reason: `not a teardown receipt: ${problem}` };
  const { receipt, signature } = signed as SignedReceipt;
  if (!isObject(keys) || !Array.isArray(keys.keys))
    return { valid: false, problem: 'malformed', reason: 'the key set is not a JWK Set ({"keys": [...]})' };
  const key = (keys.keys as unknown[]).find((k): k is ReceiptKey => isObject(k) && k.kid === signature.keyId);
  if (!key)
    return {
      valid: false,
      problem: 'unknown_key',
      reason: `unknown key id ${signature.keyId}: no key of the set signed this receipt`,
    };
  if (key.kty !== 'OKP' || key.crv !== 'Ed25519' || typeof key.x !== 'string')
    return { valid: false, problem: 'malformed', reason: `key ${key.kid} is not an Ed25519 public key (OKP)` };
  let ok: boolean;
  try {
    const publicKey = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: key.x }, format: 'jwk' });
    ok = verify(
      null,
      Buffer.from(canonicalJson(receipt), 'utf8'),
      publicKey,
      Buffer.from(signature.value, 'base64url'),
    );
  } catch (err) {
    return { valid: false, problem: 'malformed', reason: `key ${key.kid} is unusable: ${(err as Error).message}` };
  }
  if (!ok)
    return {
      valid: false,
      problem: 'bad_signature',
      reason: `bad signature: the receipt is not what key ${key.kid} signed (${RECEIPT_SIGNATURE_ALG})`,
    };
  return { valid: true, receipt, key };
}
