import { createHash, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';

/**
 * Fixed tags per kind of secret, so secret scanners can recognise a leaked value:
 * API keys `gpr_<prefix>.<secret>`, setup codes `gps_<43>`, public approval codes `gpa_<43>`.
 */
export const API_KEY_TAG = 'gpr';
export const SETUP_CODE_TAG = 'gps';
export const APPROVAL_CODE_TAG = 'gpa';

const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const API_KEY_RE = new RegExp(`^${API_KEY_TAG}_([A-Za-z0-9]{8})\\.([A-Za-z0-9_-]{43})$`);
export const SETUP_CODE_PATTERN = `^${SETUP_CODE_TAG}_[A-Za-z0-9_-]{43}$`;

export function sha256(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

export function sha256Hex(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('hex');
}

export function hashesEqual(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

function base62(length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += BASE62[randomInt(BASE62.length)];
  return out;
}

/** 32 random bytes, base64url: 43 characters. */
export function randomSecret(): string {
  return randomBytes(32).toString('base64url');
}

export interface MintedApiKey {
  token: string;
  prefix: string;
  secretHash: Buffer;
}

export function mintApiKey(): MintedApiKey {
  const prefix = base62(8);
  const secret = randomSecret();
  return { token: `${API_KEY_TAG}_${prefix}.${secret}`, prefix, secretHash: sha256(secret) };
}

export function parseApiKey(token: string): { prefix: string; secretHash: Buffer } | null {
  const m = API_KEY_RE.exec(token);
  return m ? { prefix: m[1], secretHash: sha256(m[2]) } : null;
}

export function mintCode(tag: string): { code: string; hash: Buffer } {
  const code = `${tag}_${randomSecret()}`;
  return { code, hash: sha256(code) };
}
