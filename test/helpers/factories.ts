import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { TestContext } from './context.js';

export interface SignedUp {
  token: string;
  accountId: string;
  keyId: string;
  auth: { Authorization: string };
}

/** Signs up through the API, as an agent would. */
export async function signup(ctx: TestContext, body: Record<string, unknown> = {}): Promise<SignedUp> {
  const res = await ctx.api.post('/api/v1/signup').set('Idempotency-Key', randomUUID()).send(body);
  assert.equal(res.status, 201, JSON.stringify(res.body));
  const { token, account } = res.body.data;
  return { token, accountId: account.user.id, keyId: account.key.id, auth: { Authorization: `Bearer ${token}` } };
}
