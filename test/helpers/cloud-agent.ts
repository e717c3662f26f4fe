import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { TestContext } from './context.js';
import { signup, type SignedUp } from './factories.js';
import { createTopup } from './payments.js';
import { waitFor } from './process.js';

/**
 * What an agent does against a whole service brokering clouds (API + worker + cloud fakes), for the
 * end-to-end cloud suites: sign up and pay a top-up, rent, watch a deployment, terminate.
 */
export function cloudAgent(ctx: TestContext) {
  /** A new agent whose credits a human paid on the development page. */
  async function fundedAgent(amountMinor = 20_000): Promise<SignedUp> {
    const who = await signup(ctx, { maxPerRentalMinor: 20_000, budgetLimitMinor: 50_000, maxConcurrentDeployments: 5 });
    const { topup } = await createTopup(ctx, who, amountMinor);
    assert.equal((await ctx.api.post(new URL(topup.paymentUrl).pathname)).status, 303);
    return who;
  }

  /** Polls the deployment, moving the test clock on, until it is in one of `statuses`. */
  async function deployment(who: SignedUp, id: string, statuses: string[], ms = 60_000): Promise<Record<string, unknown>> {
    let last: Record<string, unknown> | undefined;
    await waitFor(async () => {
      ctx.clock.advance(200);
      const res = await ctx.api.get(`/api/v1/deployments/${id}`).set(who.auth);
      last = res.body.data;
      return statuses.includes(res.body.data?.status);
    }, ms, `deployment ${id} in ${statuses}`);
    return last!;
  }

  /** A new rental (201), with a fresh Idempotency-Key. */
  async function rent(who: SignedUp, body: object): Promise<{ rentalId: string; deploymentId: string }> {
    const res = await ctx.api.post('/api/v1/rentals').set(who.auth).set('Idempotency-Key', randomUUID()).send(body);
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.data as { rentalId: string; deploymentId: string };
  }

  /** Terminates and waits for TERMINATED with a verified `endedAt`. */
  async function terminate(who: SignedUp, deploymentId: string): Promise<Record<string, unknown>> {
    assert.equal((await ctx.api.post(`/api/v1/deployments/${deploymentId}/terminate`).set(who.auth)).status, 202);
    const done = await deployment(who, deploymentId, ['TERMINATED']);
    assert.ok(done.endedAt, 'endedAt is set once destruction is verified');
    return done;
  }

  /** The deployment's create attempts as `provider:OUTCOME`, in order. */
  async function attempts(deploymentId: string): Promise<string[]> {
    const rows: { outcome: string; provider: string }[] = await ctx.services.ds.query(
      `SELECT outcome, provider_id AS provider FROM deployment_attempts WHERE deployment_id = ? ORDER BY attempt`,
      [deploymentId],
    );
    return rows.map((r) => `${r.provider}:${r.outcome}`);
  }

  return { fundedAgent, deployment, rent, terminate, attempts };
}

/** The agent actions of {@link cloudAgent}. */
export type CloudAgent = ReturnType<typeof cloudAgent>;
