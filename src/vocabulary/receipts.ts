// Teardown receipts as the service signs them and the clients check them (docs/teardown-receipts.md):
// the one statement of the canonical form both sides sign and verify over, and the names they share.

/** The receipt format this code writes and reads. */
export const RECEIPT_VERSION = 1;

/** What a receipt says it is, so that a signature over it is never taken for one over another kind of document. */
export const RECEIPT_TYPE = 'gpr.teardown-receipt';

/** The only signature algorithm receipts use (RFC 8032, pure Ed25519 over the canonical bytes). */
export const RECEIPT_SIGNATURE_ALG = 'Ed25519';

/** Where a service publishes its receipt keys (a JWK Set, no credential). */
export const RECEIPT_KEYS_PATH = '/.well-known/gpr-receipt-keys.json';

/**
 * The canonical form of a JSON value, as receipts are signed: objects with their keys sorted by
 * UTF-16 code units, no whitespace, strings escaped as `JSON.stringify` escapes them, UTF-8 when
 * turned into bytes. For the values a receipt holds (strings, integers, booleans, null, objects,
 * arrays) this is exactly RFC 8785 (JCS). Throws on anything JSON cannot carry (undefined, a
 * function, a number that is not finite), so no two values share a form.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value === 'boolean' || typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new TypeError(`${value} has no JSON form`);
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  throw new TypeError(`a ${typeof value} has no JSON form`);
}

/** One published receipt key: a JWK (RFC 8037) with when it was made and retired. */
export interface ReceiptKey {
  kty: 'OKP';
  crv: 'Ed25519';
  /** The raw 32-byte public key, unpadded base64url. */
  x: string;
  kid: string;
  use: 'sig';
  alg: 'Ed25519';
  /** When the key was made (ISO 8601). */
  createdAt: string;
  /** When it stopped signing (ISO 8601); null while it is the active key. Receipts it signed keep verifying. */
  retiredAt: string | null;
}

/** The receipt keys, as a service serves them at {@link RECEIPT_KEYS_PATH} (a JWK Set, RFC 7517). */
export interface ReceiptKeySet {
  keys: ReceiptKey[];
}

/** A signature in receipts' encoding: 64 bytes as unpadded base64url. */
export const RECEIPT_SIGNATURE_PATTERN = /^[A-Za-z0-9_-]{86}$/;

/**
 * What is wrong with the outer shape of a signed receipt (`{ receipt, signature: { alg, keyId,
 * value } }`), in one line; null when the shape holds. It checks the envelope a verifier needs,
 * not the receipt's fields: the signature covers those.
 */
export function signedReceiptProblem(doc: unknown): string | null {
  if (!isObject(doc)) return 'not a JSON object';
  const { receipt, signature } = doc;
  if (!isObject(receipt)) return 'no "receipt" object';
  if (!isObject(signature)) return 'no "signature" object';
  if (signature.alg !== RECEIPT_SIGNATURE_ALG)
    return `signature.alg is ${JSON.stringify(signature.alg)}, not "${RECEIPT_SIGNATURE_ALG}"`;
  if (typeof signature.keyId !== 'string' || !signature.keyId) return 'signature.keyId is missing';
  if (typeof signature.value !== 'string' || !RECEIPT_SIGNATURE_PATTERN.test(signature.value))
    return 'signature.value is not 64 bytes of base64url';
  if (receipt.keyId !== signature.keyId) return 'receipt.keyId and signature.keyId differ';
  if (receipt.type !== RECEIPT_TYPE) return `receipt.type is not "${RECEIPT_TYPE}"`;
  if (receipt.version !== RECEIPT_VERSION)
    return `receipt.version ${JSON.stringify(receipt.version)} is not ${RECEIPT_VERSION}, the version this reader knows`;
  return null;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
