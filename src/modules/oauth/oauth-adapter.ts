import { createHash } from 'node:crypto';
import type { Adapter, AdapterPayload } from 'oidc-provider';
import type { Clock } from '../../clock.js';
import type { Store } from '../../db/store.js';
import type { SecretBox } from '../credentials/secret-box.js';
import type { OAuthRecordsRepository } from './oauth-records.repository.js';

/** What the authorization server's storage needs: the records' repository. */
export type OAuthStore = Store<{ oauth: OAuthRecordsRepository }>;

const hash = (model: string, value: string) => createHash('sha256').update(`${model}\u0000${value}`).digest('hex');
const grantHash = (grantId: string) => hash('Grant', grantId);

/**
 * The authorization server's storage on our database, for every api process alike (the
 * library's own store is one process's memory). A record's id is a token value for most models,
 * so only its hash is stored; the payload holds more of them (a code's challenge, a client's
 * secret) and is sealed with the secrets key, bound to the row it belongs to.
 */
export class OAuthAdapter implements Adapter {
  constructor(
    private readonly model: string,
    private readonly store: OAuthStore,
    private readonly box: SecretBox,
    private readonly clock: Clock,
  ) {}

  private aad(idHash: string): string {
    return `oauth_records:${this.model}:${idHash}`;
  }

  async upsert(id: string, payload: AdapterPayload, expiresIn?: number): Promise<void> {
    const idHash = hash(this.model, id);
    const sealed = this.box.seal(JSON.stringify(payload), this.aad(idHash));
    const now = this.clock.now().getTime();
    await this.store.read((r) =>
      r.oauth.upsert({
        model: this.model,
        idHash,
        grantHash: payload.grantId ? grantHash(payload.grantId) : null,
        uidHash: payload.uid ? hash(this.model, payload.uid) : null,
        userCodeHash: payload.userCode ? hash(this.model, payload.userCode) : null,
        payload: sealed.ciphertext,
        keyId: sealed.keyId,
        expiresAt: expiresIn ? new Date(now + expiresIn * 1000) : null,
      }),
    );
  }

  private open(record: Awaited<ReturnType<OAuthRecordsRepository['find']>>): AdapterPayload | undefined {
    if (!record) return undefined;
    let payload: AdapterPayload;
    try {
      payload = JSON.parse(this.box.open(record.payload, record.keyId, this.aad(record.idHash))) as AdapterPayload;
    } catch {
      // Sealed under a key no longer configured (or altered): as good as absent, so its client
      // authorizes again rather than meeting a server error.
      return undefined;
    }
    if (record.consumedAt) payload.consumed = Math.floor(record.consumedAt.getTime() / 1000);
    return payload;
  }

  async find(id: string): Promise<AdapterPayload | undefined> {
    const now = this.clock.now();
    return this.open(await this.store.read((r) => r.oauth.find(this.model, hash(this.model, id), now)));
  }

  async findByUid(uid: string): Promise<AdapterPayload | undefined> {
    const now = this.clock.now();
    return this.open(await this.store.read((r) => r.oauth.findByUid(this.model, hash(this.model, uid), now)));
  }

  async findByUserCode(userCode: string): Promise<AdapterPayload | undefined> {
    const now = this.clock.now();
    return this.open(await this.store.read((r) => r.oauth.findByUserCode(this.model, hash(this.model, userCode), now)));
  }

  async consume(id: string): Promise<void> {
    const at = this.clock.now();
    await this.store.read((r) => r.oauth.consume(this.model, hash(this.model, id), at));
  }

  async destroy(id: string): Promise<void> {
    await this.store.read((r) => r.oauth.destroy(this.model, hash(this.model, id)));
  }

  async revokeByGrantId(grantId: string): Promise<void> {
    await this.store.read((r) => r.oauth.revokeByGrant(grantHash(grantId)));
  }
}
