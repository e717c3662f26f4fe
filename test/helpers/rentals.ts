import { recountKeySlots } from './ledger.js';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { BillingModel } from '../../src/config.js';
import { Account } from '../../src/modules/accounts/account.entity.js';
import { SecretBox } from '../../src/modules/credentials/secret-box.js';
import { Offer } from '../../src/modules/inventory/offer.entity.js';
import type { Scope } from '../../src/modules/keys/api-key.entity.js';
import type { KeyKind } from '../../src/modules/keys/api-key.entity.js';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import { Order } from '../../src/modules/rentals/store/order.entity.js';
import type { RentalStatus } from '../../src/modules/rentals/state/rental-status.js';
import { generateDeploymentKeyPair } from '../../src/providers/ssh-keys.js';
import type { TestContext } from './context.js';
import { signup, type SignedUp } from './factories.js';
import { waitFor } from './wait.js';

export interface KeyOptions {
  kind?: KeyKind;
  scopes?: Scope[];
  maxPerRentalMinor?: number;
  budgetLimitMinor?: number;
  maxConcurrentDeployments?: number;
}

/** A new account (through signup) whose first key is replaced by one with the given limits. */
export async function account(
  ctx: TestContext,
  opts: KeyOptions & { billingModel?: BillingModel; creditsMinor?: number } = {},
): Promise<SignedUp> {
  const who = await signup(ctx);
  if (opts.billingModel)
    await ctx.services.ds.getRepository(Account).update({ id: who.accountId }, { billingModel: opts.billingModel });
  if (opts.creditsMinor) await credit(ctx, who.accountId, opts.creditsMinor);
  return addKey(ctx, who.accountId, opts);
}

/** Another key on an existing account (test setup; the agent-key endpoints are another module's). */
export async function addKey(ctx: TestContext, accountId: string, opts: KeyOptions = {}): Promise<SignedUp> {
  const { key, token } = await ctx.services.store.transaction((r) =>
    ctx.services.keys.create(r.accounts, {
      accountId,
      kind: opts.kind ?? 'AGENT',
      name: 'test key',
      scopes: opts.scopes ?? ['read', 'rent', 'manage'],
      origin: 'test',
      maxPerRentalMinor: opts.maxPerRentalMinor ?? 100_000,
      budgetLimitMinor: opts.budgetLimitMinor ?? 1_000_000,
      maxConcurrentDeployments: opts.maxConcurrentDeployments ?? 100,
    }),
  );
  return { token, accountId, keyId: key.id, auth: { Authorization: `Bearer ${token}` } };
}

/** Credits the account through the ledger, as a paid top-up would. */
export async function credit(
  ctx: TestContext,
  accountId: string,
  amountMinor: number,
  kind: 'TOPUP' | 'ADJUSTMENT' = 'TOPUP',
): Promise<void> {
  await ctx.services.store.transaction((r) =>
    ctx.services.ledger.post(r, {
      accountId,
      kind,
      amountMinor,
      externalRef: `test:${randomUUID()}`,
      description: 'test credit',
    }),
  );
}

/** Posts a spend entry (usage or reversal) attributed to a key and rental, as the lifecycle jobs do. */
export async function postForKey(
  ctx: TestContext,
  who: SignedUp,
  kind: 'USAGE' | 'REVERSAL',
  amountMinor: number,
  rentalId: string | null = null,
): Promise<void> {
  await ctx.services.store.transaction((r) =>
    ctx.services.ledger.post(r, {
      accountId: who.accountId,
      kind,
      amountMinor,
      externalRef: `test:${kind}:${randomUUID()}`,
      description: `test ${kind.toLowerCase()}`,
      keyId: who.keyId,
      rentalId,
    }),
  );
}

export async function offerIds(ctx: TestContext): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  // Only what is on sale now: the table also keeps offers earlier test files took off the list.
  for (const o of await ctx.services.ds.getRepository(Offer).findBy({ available: true }))
    out[o.providerOfferKey] = o.id;
  return out;
}

export function rent(ctx: TestContext, who: SignedUp, body: unknown, key: string = randomUUID()) {
  return ctx.api
    .post('/api/v1/rentals')
    .set(who.auth)
    .set('Idempotency-Key', key)
    .send(body as object);
}

/** Rents and asserts 201; returns the rental. */
export async function rentOk(
  ctx: TestContext,
  who: SignedUp,
  body: unknown,
): Promise<{ rentalId: string; deploymentId: string; [k: string]: unknown }> {
  const res = await rent(ctx, who, body);
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body.data;
}

/** Moves a rental's order and deployment to a status directly (what the lifecycle jobs would do). */
export async function setStatus(
  ctx: TestContext,
  deploymentId: string,
  status: RentalStatus,
  extra: Partial<Deployment> = {},
): Promise<void> {
  const d = await ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id: deploymentId });
  await ctx.services.ds.getRepository(Deployment).update({ id: deploymentId }, { status, ...extra });
  await ctx.services.ds.getRepository(Order).update({ id: d.orderId }, { status });
  await recountKeySlots(ctx.services.ds, d.keyId);
}

/**
 * Makes a deployment ACTIVE with a real, freshly generated SSH key sealed exactly as provisioning
 * seals it (row id as additional data). Returns the key pair so a test can compare.
 */
export async function makeActive(
  ctx: TestContext,
  deploymentId: string,
  ssh = { host: '127.0.0.1', port: 2222, user: 'ubuntu' },
) {
  const pair = generateDeploymentKeyPair(`gpu-rental-${deploymentId}`);
  const sealed = SecretBox.fromConfig(ctx.config).seal(pair.privateKey, deploymentId);
  await setStatus(ctx, deploymentId, 'ACTIVE', {
    startedAt: ctx.clock.now(),
    instanceId: `inst-${deploymentId.slice(0, 8)}`,
    sshHost: ssh.host,
    sshPort: ssh.port,
    sshUser: ssh.user,
    sshPublicKey: pair.publicKey,
    sshPrivateKeyEnc: sealed.ciphertext,
    sshKeyKid: sealed.keyId,
  });
  return pair;
}

/** The lifecycle jobs waiting for a deployment (no worker runs in API tests, so they stay queued). */
export async function queuedJobs(
  ctx: TestContext,
  deploymentId: string,
): Promise<{ name: string; deploymentId: string }[]> {
  const rows: { name: string; data: string | { deploymentId: string } }[] = await ctx.services.ds.query(
    `SELECT name, data FROM agenda_jobs WHERE unique_key = ? AND locked_at IS NULL AND last_finished_at IS NULL ORDER BY id`,
    [deploymentId],
  );
  return rows.map((r) => ({
    name: r.name,
    deploymentId: (typeof r.data === 'string' ? JSON.parse(r.data) : r.data).deploymentId,
  }));
}

/** Drops the rental jobs queued so far, so a test can see exactly what one call queues. */
export async function discardQueuedRentalJobs(ctx: TestContext): Promise<void> {
  await ctx.services.ds.query(
    `DELETE FROM agenda_jobs WHERE name IN ('rental.provision', 'rental.terminate') AND locked_at IS NULL`,
  );
}

/**
 * Rents `offerId`, waits for ACTIVE (moving the injected clock so the local provider boots),
 * terminates, and waits for TERMINATED: one whole rental life through the API and a running worker.
 */
export async function rentUntilTerminated(
  ctx: TestContext,
  who: SignedUp,
  offerId: string,
): Promise<{ rentalId: string; deploymentId: string }> {
  const res = await ctx.api
    .post('/api/v1/rentals')
    .set(who.auth)
    .set('Idempotency-Key', randomUUID())
    .send({ offerId });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  const { rentalId, deploymentId } = res.body.data;
  const status = async () => (await ctx.api.get(`/api/v1/rentals/${rentalId}`).set(who.auth)).body.data.status;
  await waitFor(async () => (ctx.clock.advance(200), (await status()) === 'ACTIVE'), { what: 'ACTIVE' });
  assert.equal((await ctx.api.post(`/api/v1/deployments/${deploymentId}/terminate`).set(who.auth)).status, 202);
  await waitFor(async () => (ctx.clock.advance(200), (await status()) === 'TERMINATED'), { what: 'TERMINATED' });
  return { rentalId, deploymentId };
}

/**
 * Runs a lifecycle step (provision, terminate) on the deployment again and again, as its job
 * would be run, until the deployment has `status`; answers it then.
 */
export async function stepUntil(
  ctx: TestContext,
  deploymentId: string,
  status: RentalStatus,
  step: (deploymentId: string) => Promise<unknown>,
  timeoutMs = 30_000,
): Promise<Deployment> {
  let d: Deployment | null = null;
  await waitFor(
    async () => {
      await step(deploymentId);
      d = await ctx.services.ds.getRepository(Deployment).findOneByOrFail({ id: deploymentId });
      return d.status === status;
    },
    { timeoutMs: timeoutMs, what: `deployment ${deploymentId} ${status}` },
  );
  return d!;
}
