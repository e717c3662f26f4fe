import type { Topup } from '@gpu-rental/sdk';
import { z } from 'zod';
import { refusal, success } from './guard.js';
import * as s from './schemas.js';
import { defineTool, type ToolDeps } from './tool.js';

// The account's tools: its credits and limits, a first key for a server without one, top-ups, and the key's events.

export const getAccount = defineTool({
  name: 'get_account',
  title: 'Get account',
  description:
    "The account's credits (cents), the key's limits and remaining budget, and billing: if billing.budgetRequired is true, create_rental needs budgetMinor of at least 500.",
  inputSchema: {},
  outputSchema: { account: s.account },
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true },
  run: async (_a, deps) => success({ account: await deps.client().me() }),
});

export const signup = defineTool({
  name: 'signup',
  title: 'Sign up',
  description:
    'Creates a new account with zero credits and an API key for this server, stored in its config file (mode 0600) and used for every later call; the token itself is never shown. ' +
    'Spends nothing. Only for a server without a key: one that has a key refuses, since a second signup makes a second, empty account. ' +
    'Limits of the key in USD cents (defaults: 500 per rental, 50000 in all, 1 rental at a time). Next: create_topup_link for a human to add credits.',
  inputSchema: {
    name: z.string().min(1).max(100).optional().describe('what the agent calls itself, e.g. "nightly-trainer"'),
    maxPerRentalMinor: z
      .number()
      .int()
      .min(500)
      .max(100_000_000)
      .optional()
      .describe('USD cents the key may spend on one rental'),
    budgetLimitMinor: z
      .number()
      .int()
      .min(500)
      .max(1_000_000_000)
      .optional()
      .describe('USD cents the key may spend in all'),
    maxConcurrentDeployments: z.number().int().min(1).max(1000).optional().describe('rentals the key may run at once'),
  },
  outputSchema: { account: s.account, configPath: z.string(), next: z.string() },
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
  run: async (a, deps) => {
    if (!deps.adoptToken) {
      return refusal(
        'REFUSED: this connection already acts as an agent key its owner approved; get_account shows its credits and limits. Nothing was sent.',
      );
    }
    if (deps.token) {
      return refusal(
        'REFUSED: this server already has an API key; a signup would make a second, empty account. Nothing was done. ' +
          'Next: get_account shows its credits and limits; if the key was revoked, ask its owner for a new key or a setup code.',
      );
    }
    const res = await deps.client().signup(a);
    const configPath = deps.adoptToken(res.token);
    const next =
      'Credits are 0: call create_topup_link and give the link to a human; their payment adds credits. Then create_rental.';
    return success({ account: await deps.client().me(), configPath, next });
  },
});

/** The amounts one top-up link may ask for, in cents, as the service takes them. */
export const TOPUP_MIN_MINOR = 500;
export const TOPUP_MAX_MINOR = 50000;

/** A hosted card payment link for a human: what create_topup_link makes, and create_rental when refused for credits. */
export const openTopup = (deps: ToolDeps, amountMinor: number, idempotencyKey: string): Promise<Topup> =>
  deps.client().createTopup(amountMinor, idempotencyKey);

export const createTopupLink = defineTool({
  name: 'create_topup_link',
  title: 'Create a top-up payment link',
  description:
    'Creates a hosted card payment link for a HUMAN to add credits (amountMinor 500-50000 cents). Only their payment credits the account. ' +
    'Spending tool: needs a server started with GPR_MCP_ALLOW_SPEND=1; when refused, ask a human to run `gpr topup <usd>`.',
  inputSchema: {
    amountMinor: z.number().int().min(TOPUP_MIN_MINOR).max(TOPUP_MAX_MINOR).describe('USD cents'),
    idempotencyKey: z
      .string()
      .min(1)
      .max(128)
      .optional()
      .describe('reuse to get the same link back; generated when absent'),
  },
  outputSchema: { topup: s.topup, idempotencyKey: z.string() },
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
  guarded: 'spends',
  run: async (a, deps) => {
    const key = a.idempotencyKey ?? crypto.randomUUID();
    return success({ topup: await openTopup(deps, a.amountMinor, key), idempotencyKey: key });
  },
});

export const listEvents = defineTool({
  name: 'list_events',
  title: 'List events',
  description:
    "The key's events after an id, oldest first: rental.provisioning, rental.active, rental.failed, rental.terminating, rental.terminated, rental.expiring, rental.idle_warning, credits.low (owner keys also topup.paid). " +
    'data is the rental (or the balance) as a read showed it then. Without after the page is the newest events (the latest 50 unless limit says otherwise), so a first look shows what happened; keep nextAfter and pass it as after next time to see what happened since (after "0": the whole history).',
  inputSchema: {
    after: z
      .string()
      .regex(/^\d{1,20}$/)
      .optional()
      .describe('an event id (a previous nextAfter); absent: the newest page; "0": from the start'),
    limit: z.number().int().min(1).max(100).optional().describe('default 50'),
  },
  outputSchema: { events: z.array(s.event), nextAfter: z.string() },
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true },
  run: async (a, deps) => {
    const page = await deps.client().events(a);
    return success({ events: page.data, nextAfter: page.nextAfter });
  },
});
