import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/**
 * AES-256-GCM sealing of secrets at rest (deployment SSH private keys, machine settings' secret
 * values, webhook signing secrets). The caller binds each
 * ciphertext to its row by passing the row id as additional data, so a ciphertext copied onto
 * another row fails to open. Layout: version byte, 12-byte nonce, 16-byte tag, ciphertext.
 */
export class SecretBox {
  private static readonly VERSION = 1;

  /** @param keys key-encryption keys by id; `currentKeyId` seals, any listed key opens. */
  constructor(
    private readonly keys: ReadonlyMap<string, Buffer>,
    readonly currentKeyId: string,
  ) {
    for (const [id, key] of keys) if (key.length !== 32) throw new Error(`secret key ${id} must be 32 bytes`);
    if (!keys.has(currentKeyId)) throw new Error(`secret key ${currentKeyId} is not configured`);
  }

  /** SECRETS_KEY seals; it and the keys of earlier rotations (SECRETS_KEY_PREVIOUS) open. */
  static fromConfig(config: {
    secrets: { key: Buffer; keyId: string; previous?: readonly { id: string; key: Buffer }[] };
  }): SecretBox {
    const { key, keyId, previous } = config.secrets;
    const keys = new Map((previous ?? []).map((k) => [k.id, k.key] as const));
    keys.set(keyId, key);
    return new SecretBox(keys, keyId);
  }

  /** Whether `keyId` is the key that seals now, so a secret under it needs no resealing. */
  isCurrent(keyId: string): boolean {
    return keyId === this.currentKeyId;
  }

  seal(plaintext: string, additionalData: string): { ciphertext: Buffer; keyId: string } {
    const nonce = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.keys.get(this.currentKeyId)!, nonce);
    cipher.setAAD(Buffer.from(additionalData, 'utf8'));
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    const ciphertext = Buffer.concat([Buffer.from([SecretBox.VERSION]), nonce, cipher.getAuthTag(), body]);
    return { ciphertext, keyId: this.currentKeyId };
  }

  /** Throws when the key id is unknown, the data was altered, or the additional data differs. */
  open(ciphertext: Buffer, keyId: string, additionalData: string): string {
    const key = this.keys.get(keyId);
    if (!key) throw new Error(`secret key ${keyId} is not configured`);
    if (ciphertext.length < 29 || ciphertext[0] !== SecretBox.VERSION) throw new Error('unrecognised sealed secret');
    const decipher = createDecipheriv('aes-256-gcm', key, ciphertext.subarray(1, 13));
    decipher.setAuthTag(ciphertext.subarray(13, 29));
    decipher.setAAD(Buffer.from(additionalData, 'utf8'));
    return Buffer.concat([decipher.update(ciphertext.subarray(29)), decipher.final()]).toString('utf8');
  }
}

/**
 * Earlier keys as an operator writes them: comma-separated `id:base64` entries (SECRETS_KEY_PREVIOUS).
 * Throws, saying what is wrong, on a malformed entry, a key not 32 bytes long, an id listed twice or
 * `currentId` (the id that seals now) among them.
 */
export function parseKeyList(raw: string, currentId: string): { id: string; key: Buffer }[] {
  const out: { id: string; key: Buffer }[] = [];
  for (const entry of raw
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean)) {
    const at = entry.indexOf(':');
    const id = entry.slice(0, Math.max(at, 0));
    if (!/^[A-Za-z0-9_.-]{1,32}$/.test(id))
      throw new Error(
        'must list id:key entries (an id of 1-32 letters, digits, _ . -, then the 32-byte key in base64), comma-separated',
      );
    const key = Buffer.from(entry.slice(at + 1), 'base64');
    if (key.length !== 32) throw new Error(`gives ${id} a key that is not 32 bytes encoded as base64`);
    if (id === currentId)
      throw new Error(`lists ${id}, the id of SECRETS_KEY (SECRETS_KEY_ID): give the new key a new id`);
    if (out.some((k) => k.id === id)) throw new Error(`lists ${id} twice`);
    out.push({ id, key });
  }
  return out;
}
