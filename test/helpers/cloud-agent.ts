import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import lambdaPlugin from '../../plugins/lambda/index.js';
import type { LambdaOptions } from '../../plugins/lambda/options.js';
import runpodPlugin from '../../plugins/runpod/index.js';
import { RunpodProvider } from '../../plugins/runpod/provider.js';
import vastPlugin from '../../plugins/vast/index.js';
import { VastProvider } from '../../plugins/vast/provider.js';
import type { Provider, ProviderPlugin } from '../../src/providers/provider.js';
import { ProviderRegistry } from '../../src/providers/provider-registry.js';
import type { SshTarget } from '../../src/providers/ssh-probe.js';
import type { FakeLambdaApi } from '../fakes/lambda-api.js';
import type { FakeRunpodApi } from '../fakes/runpod-api.js';
import type { FakeVastApi } from '../fakes/vast-api.js';
import { FAST_TUNING as LAMBDA_FAST } from '../plugins/lambda-harness.js';
import { NO_LIMITS as RUNPOD_NO_LIMITS } from '../plugins/runpod-harness.js';
import { FAST_TUNING as VAST_FAST } from '../plugins/vast-harness.js';
import type { ContextOptions, TestContext } from './context.js';
import { signup, type SignedUp } from './factories.js';
import { createTopup } from './payments.js';
import { waitFor } from './wait.js';

/** The three clouds' fakes a service brokers in the end-to-end cloud suites; a suite may start only some. */
export interface CloudFakes {
  vast?: FakeVastApi;
  runpod?: FakeRunpodApi;
  lambda?: FakeLambdaApi;
}

/**
 * The environment and provider registry of a service brokering the clouds of `fakes` (those
 * given, in that order): options come from the environment exactly as in production, and the real
 * plugins run with only their rate-limit spacing and poll caching shortened.
 */
export function cloudService(
  fakes: CloudFakes,
  env: Record<string, string> = {},
): Pick<ContextOptions, 'env' | 'registry'> {
  const { vast, runpod, lambda } = fakes;
  return {
    env: {
      PROVIDERS: Object.keys(fakes)
        .filter((id) => fakes[id as keyof CloudFakes])
        .join(','),
      RENTAL_POLL_MS: '50',
      ...(vast ? { VAST_PROVIDER_API_KEY: vast.apiKey, VAST_PROVIDER_API_URL: vast.url } : {}),
      ...(runpod ? { RUNPOD_PROVIDER_API_KEY: runpod.apiKey, RUNPOD_PROVIDER_API_URL: runpod.url } : {}),
      ...(lambda
        ? {
            LAMBDA_PROVIDER_API_KEY: lambda.apiKey,
            LAMBDA_PROVIDER_API_URL: lambda.url,
            LAMBDA_PROVIDER_SSH_PORT: String(lambda.sshPort),
          }
        : {}),
      ...env,
    },
    async registry(configs, deps) {
      const build: Record<
        string,
        (raw: Record<string, string>) => Promise<{ plugin: ProviderPlugin<never>; provider: Provider }>
      > = {
        vast: async (raw) => ({
          plugin: vastPlugin as ProviderPlugin<never>,
          provider: new VastProvider(vastPlugin.validateOptions(raw), deps, VAST_FAST),
        }),
        runpod: async (raw) => ({
          plugin: runpodPlugin as ProviderPlugin<never>,
          provider: new RunpodProvider(runpodPlugin.validateOptions(raw), deps, {
            limits: RUNPOD_NO_LIMITS,
            pollTtlMs: 100,
            timeoutMs: 2000,
          }),
        }),
        lambda: async (raw) => ({
          plugin: lambdaPlugin as ProviderPlugin<never>,
          provider: await lambdaPlugin.create(
            { ...(lambdaPlugin.validateOptions(raw) as LambdaOptions), tuning: LAMBDA_FAST },
            deps,
          ),
        }),
      };
      const entries = [];
      for (const c of configs) {
        const { plugin, provider } = await build[c.id](c.options);
        entries.push({ id: c.id, description: plugin.description, markupPercent: c.markupPercent, provider });
      }
      return new ProviderRegistry(entries, deps.drift);
    },
  };
}

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

  /**
   * Polls the deployment, moving the test clock on, until it is in one of `statuses`. The bound is
   * what a loaded machine needs to boot a fake machine and pass the SSH checks, not a wait.
   */
  async function deployment(
    who: SignedUp,
    id: string,
    statuses: string[],
    ms = 120_000,
  ): Promise<Record<string, unknown>> {
    let last: Record<string, unknown> | undefined;
    await waitFor(
      async () => {
        ctx.clock.advance(200);
        const res = await ctx.api.get(`/api/v1/deployments/${id}`).set(who.auth);
        last = res.body.data;
        return statuses.includes(res.body.data?.status);
      },
      { timeoutMs: ms, what: `deployment ${id} in ${statuses}` },
    );
    return last!;
  }

  /** A new rental (201), with a fresh Idempotency-Key. */
  async function rent(who: SignedUp, body: object): Promise<{ rentalId: string; deploymentId: string }> {
    const res = await ctx.api.post('/api/v1/rentals').set(who.auth).set('Idempotency-Key', randomUUID()).send(body);
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.data as { rentalId: string; deploymentId: string };
  }

  /** Where the deployment's revealed credentials log in. */
  async function sshTarget(who: SignedUp, deploymentId: string): Promise<SshTarget> {
    const res = await ctx.api.post(`/api/v1/deployments/${deploymentId}/credentials/reveal`).set(who.auth);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const c = res.body.data;
    return { host: c.host, port: c.port, user: c.user, privateKey: c.privateKey };
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

  return { fundedAgent, deployment, rent, sshTarget, terminate, attempts };
}

/** The agent actions of {@link cloudAgent}. */
export type CloudAgent = ReturnType<typeof cloudAgent>;
