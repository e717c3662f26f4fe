import { createHash, createPrivateKey, generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { canonicalJson, RECEIPT_SIGNATURE_ALG, type ReceiptKey } from '../../vocabulary/receipts.js';
import type { ReceiptSigningKey } from './receipt-signing-key.entity.js';
import type { TeardownReceiptDto } from './receipts.dto.js';

// The receipt keys' rules in one place: how a pair is made and named, what its sealed private half
// is bound to, how a receipt is signed with it, and how its public half is published.

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';

/** RFC 4648 base32 (lower case, unpadded). */
function base32(bytes: Uint8Array): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const b of bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  return bits > 0 ? out + BASE32[(value << (5 - bits)) & 31] : out;
}

/** A key's id: `rk_` and the base32 of the first 10 bytes (80 bits) of its raw public key's SHA-256. */
export function receiptKeyId(publicKey: Buffer): string {
  return `rk_${base32(createHash('sha256').update(publicKey).digest().subarray(0, 10))}`;
}

/** What a signing key's sealed private half is bound to (SecretBox additional data): its own row. */
export function signingKeyBinding(id: string): string {
  return `receipt-signing-key:${id}`;
}

/** A fresh pair: the raw public key, the private key as its JWK `d` (to be sealed), and the id. */
export function newSigningPair(): { id: string; publicKey: Buffer; privateD: string } {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const x = Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url');
  return { id: receiptKeyId(x), publicKey: x, privateD: privateKey.export({ format: 'jwk' }).d! };
}

/** Signs receipts with one opened key. */
export interface ReceiptSigner {
  readonly keyId: string;
  /** The receipt's signature: Ed25519 over its canonical form's UTF-8 bytes, unpadded base64url. */
  sign(receipt: TeardownReceiptDto): string;
}

/** The signer of a pair whose private half (`d`) was opened. */
export function receiptSigner(keyId: string, publicKey: Buffer, privateD: string): ReceiptSigner {
  const key: KeyObject = createPrivateKey({
    key: { kty: 'OKP', crv: 'Ed25519', x: publicKey.toString('base64url'), d: privateD },
    format: 'jwk',
  });
  return {
    keyId,
    sign: (receipt) => sign(null, Buffer.from(canonicalJson(receipt), 'utf8'), key).toString('base64url'),
  };
}

/** A key as published: a JWK (RFC 8037) with when it was made and retired. */
export function publishedKey(k: Pick<ReceiptSigningKey, 'id' | 'publicKey' | 'createdAt' | 'retiredAt'>): ReceiptKey {
  return {
    kty: 'OKP',
    crv: 'Ed25519',
    x: k.publicKey.toString('base64url'),
    kid: k.id,
    use: 'sig',
    alg: RECEIPT_SIGNATURE_ALG,
    createdAt: k.createdAt.toISOString(),
    retiredAt: k.retiredAt ? k.retiredAt.toISOString() : null,
  };
}
