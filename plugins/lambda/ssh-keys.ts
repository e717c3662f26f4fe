import type { Logger } from '../../src/logger.js';
import { describeFailure, failureError, type LambdaClient, type LambdaFailure } from './client.js';
import type { LambdaSshKey } from './types.js';

/** Key type and body of an OpenSSH public key line; the comment does not matter. */
const keyBody = (line: string) => line.trim().split(/\s+/).slice(0, 2).join(' ');

/**
 * The per-deployment SSH keys Lambda launches with: one account key named after the label,
 * registered just before the launch and deleted once the instance is verified gone.
 */
export class LambdaSshKeys {
  constructor(
    private readonly client: LambdaClient,
    private readonly log: Logger,
  ) {}

  async list(): Promise<LambdaSshKey[]> {
    const r = await this.client.call<LambdaSshKey[]>('api', 'GET', '/ssh-keys');
    if (!r.ok) throw failureError('GET /ssh-keys', r);
    if (!Array.isArray(r.data))
      throw this.client.drift.badResponse(
        'GET /api/v1/ssh-keys data',
        r.data,
        'lambda GET /ssh-keys: data is not a list',
      );
    return r.data;
  }

  /**
   * Registers `publicKey` under `name`, or accepts the key a previous attempt with the same label
   * registered. `public_key` is always sent: without it Lambda would generate a pair of its own.
   */
  async ensure(name: string, publicKey: string): Promise<{ ok: true } | LambdaFailure> {
    const r = await this.client.call<LambdaSshKey>('api', 'POST', '/ssh-keys', { name, public_key: publicKey });
    if (r.ok) return { ok: true };
    // A retry after an ambiguous registration finds its own key; Lambda answers that as a bad request.
    if (r.rule.create !== 'rejected' || r.status !== 400) return r;
    const existing = (await this.list()).find((k) => k.name === name);
    if (!existing) return r;
    if (keyBody(existing.public_key) === keyBody(publicKey)) return { ok: true };
    return { ...r, message: `an SSH key named ${name} already exists with a different public key` };
  }

  /** Deletes every key named `name`; succeeds when none is left. Idempotent. */
  async release(name: string): Promise<void> {
    const mine = (await this.list()).filter((k) => k.name === name);
    let refused = false;
    for (const key of mine) {
      const r = await this.client.call<object>('api', 'DELETE', `/ssh-keys/${encodeURIComponent(key.id)}`);
      if (r.ok) continue;
      // Deleted by a concurrent caller? Lambda answers an unknown key id with a 400, so ask again.
      if (r.status !== 400 && r.rule.read !== 'gone') throw failureError(`DELETE /ssh-keys/${key.id}`, r);
      this.log.info(
        { name, failure: describeFailure(r) },
        'lambda ssh key delete refused; checking whether it is gone',
      );
      refused = true;
    }
    if (!refused) return;
    const left = (await this.list()).filter((k) => k.name === name);
    if (left.length > 0) throw new Error(`lambda ssh key ${name} is still registered after deleting it`);
  }
}
