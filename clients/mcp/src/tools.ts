import type { GprClient } from '@gpu-rental/sdk';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { containsSecret, failure, redact, refusal, success } from './guard.js';
import * as s from './schemas.js';

export interface ToolDeps {
  client: () => GprClient;
  /** GPR_MCP_ALLOW_SPEND=1: tools that spend money may run. */
  allowSpend: boolean;
  token?: string;
  log: (line: string) => void;
}

const MAX_WAIT_SECONDS = 120;
const SPEND_REFUSAL = (tool: string) =>
  `${tool} spends money and this server is read-only: start it with GPR_MCP_ALLOW_SPEND=1 to allow spending tools. Nothing was done.`;

/** Registers the nine tools. Every handler refuses secret-looking input and never returns the token. */
export function registerTools(server: McpServer, deps: ToolDeps): void {
  const wrap =
    <A>(name: string, opts: { spends?: boolean }, fn: (args: A) => Promise<CallToolResult>) =>
    async (args: A): Promise<CallToolResult> => {
      if (containsSecret(args)) {
        deps.log(`${name}: refused secret-looking input`);
        return refusal('The input looks like a private key or an API token. Never pass secrets to tools; nothing was sent.');
      }
      if (opts.spends && !deps.allowSpend) {
        deps.log(`${name}: refused (read-only)`);
        return refusal(SPEND_REFUSAL(name));
      }
      try {
        const result = redact(await fn(args), deps.token);
        deps.log(`${name}: ok`);
        return result;
      } catch (err) {
        const result = redact(failure(err), deps.token);
        deps.log(`${name}: ${(err as { code?: string }).code ?? 'error'}`);
        return result;
      }
    };

  server.registerTool(
    'list_gpus',
    {
      title: 'List GPU models',
      description: 'GPU models on offer now, with counts and the price range per hour (USD cents for the whole machine) and the cheapest offer id. No account needed.',
      inputSchema: {},
      outputSchema: { unit: z.string(), models: z.array(s.gpuModel) },
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true },
    },
    wrap('list_gpus', {}, async () => {
      const g = await deps.client().gpus();
      return success({ unit: g.unit, models: g.models });
    }),
  );

  server.registerTool(
    'list_offers',
    {
      title: 'List offers',
      description: 'Current offers, cheapest first. Filter by GPU name (substring, e.g. "H100"), price ceiling in cents per hour, GPU count. Offer ids change with the inventory.',
      inputSchema: {
        gpu: z.string().max(100).optional().describe('substring of the GPU name, e.g. H100'),
        maxPricePerHourMinor: z.number().int().min(1).optional().describe('USD cents per hour, whole machine'),
        gpuCount: z.number().int().min(1).optional(),
      },
      outputSchema: { offers: z.array(s.offer) },
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true },
    },
    wrap('list_offers', {}, async (a: { gpu?: string; maxPricePerHourMinor?: number; gpuCount?: number }) => {
      const norm = (x: string) => x.toLowerCase().replace(/[\s_-]+/g, '');
      const offers = (await deps.client().offers())
        .filter((o) => (a.gpu ? norm(o.name).includes(norm(a.gpu)) : true))
        .filter((o) => (a.maxPricePerHourMinor ? o.pricePerHourMinor <= a.maxPricePerHourMinor : true))
        .filter((o) => (a.gpuCount ? o.gpuCount === a.gpuCount : true))
        .sort((x, y) => x.pricePerHourMinor - y.pricePerHourMinor);
      return success({ offers });
    }),
  );

  server.registerTool(
    'get_account',
    {
      title: 'Get account',
      description: "The account's credits (cents), the key's limits and remaining budget, and billing: if billing.budgetRequired is true, create_rental needs budgetMinor of at least 500.",
      inputSchema: {},
      outputSchema: { account: s.account },
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true },
    },
    wrap('get_account', {}, async () => success({ account: await deps.client().me() })),
  );

  server.registerTool(
    'create_topup_link',
    {
      title: 'Create a top-up payment link',
      description: 'Creates a hosted card payment link for a HUMAN to add credits (amountMinor 500-50000 cents). Only their payment credits the account. Spending tool: needs GPR_MCP_ALLOW_SPEND=1.',
      inputSchema: {
        amountMinor: z.number().int().min(500).max(50000).describe('USD cents'),
        idempotencyKey: z.string().min(1).max(128).optional().describe('reuse to get the same link back; generated when absent'),
      },
      outputSchema: { topup: s.topup, idempotencyKey: z.string() },
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    },
    wrap('create_topup_link', { spends: true }, async (a: { amountMinor: number; idempotencyKey?: string }) => {
      const key = a.idempotencyKey ?? crypto.randomUUID();
      return success({ topup: await deps.client().createTopup(a.amountMinor, key), idempotencyKey: key });
    }),
  );

  server.registerTool(
    'create_rental',
    {
      title: 'Rent a GPU machine',
      description:
        'Starts a rental paid from credits: give offerId, OR gpuModel + gpuCount + maxHourlyPriceMinor. budgetMinor (cents, the most this rental may spend) is required. ' +
        'Returns at once with status PENDING; call get_rental with waitFor ACTIVE. To retry after an error, pass the returned idempotencyKey again so no second machine is rented. Spending tool: needs GPR_MCP_ALLOW_SPEND=1.',
      inputSchema: {
        offerId: z.string().optional().describe('an exact offer id from list_offers'),
        gpuModel: z.string().min(1).max(100).optional().describe('e.g. "H100 SXM"'),
        gpuCount: z.union([z.literal(1), z.literal(2), z.literal(4), z.literal(8)]).optional(),
        maxHourlyPriceMinor: z.number().int().min(1).optional().describe('USD cents per hour for the whole machine; never exceeded'),
        budgetMinor: z.number().int().min(1).describe('USD cents: spending cap for this rental (at least 500 on prepaid accounts)'),
        idempotencyKey: z.string().min(1).max(128).optional().describe('generated and returned when absent'),
      },
      outputSchema: { rental: s.rental, idempotencyKey: z.string() },
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    },
    wrap(
      'create_rental',
      { spends: true },
      async (a: { offerId?: string; gpuModel?: string; gpuCount?: 1 | 2 | 4 | 8; maxHourlyPriceMinor?: number; budgetMinor: number; idempotencyKey?: string }) => {
        if (Boolean(a.offerId) === Boolean(a.gpuModel)) return refusal('Give exactly one of offerId or gpuModel (with gpuCount and maxHourlyPriceMinor).');
        if (a.gpuModel && (!a.gpuCount || !a.maxHourlyPriceMinor)) return refusal('gpuModel needs gpuCount and maxHourlyPriceMinor.');
        const key = a.idempotencyKey ?? crypto.randomUUID();
        const body = a.offerId
          ? { offerId: a.offerId, budgetMinor: a.budgetMinor }
          : { gpuModel: a.gpuModel!, gpuCount: a.gpuCount!, maxHourlyPriceMinor: a.maxHourlyPriceMinor!, budgetMinor: a.budgetMinor };
        return success({ rental: await deps.client().createRental(body, key), idempotencyKey: key });
      },
    ),
  );

  server.registerTool(
    'get_rental',
    {
      title: 'Get a rental',
      description: `One rental by rental or deployment id. With waitFor, waits up to waitSeconds (max ${MAX_WAIT_SECONDS}) for that status and returns the rental as it is then (check status; call again to keep waiting).`,
      inputSchema: {
        id: s.rentalOrDeploymentId,
        waitFor: z.enum(['ACTIVE', 'TERMINATED']).optional(),
        waitSeconds: z.number().int().min(1).max(MAX_WAIT_SECONDS).optional().describe('default 60'),
      },
      outputSchema: { rental: s.rental, reachedWaitFor: z.boolean().optional() },
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true },
    },
    wrap('get_rental', {}, async (a: { id: string; waitFor?: 'ACTIVE' | 'TERMINATED'; waitSeconds?: number }) => {
      const client = deps.client();
      const { rental } = await client.resolve(a.id);
      if (!a.waitFor) return success({ rental });
      try {
        const done = await client.waitForRental(rental.rentalId, { until: a.waitFor, timeoutMs: (a.waitSeconds ?? 60) * 1000, intervalMs: 1000 });
        return success({ rental: done, reachedWaitFor: true });
      } catch (err) {
        if ((err as Error).name !== 'GprTimeoutError' && (err as Error).name !== 'GprRentalStateError') throw err;
        return success({ rental: await client.getRental(rental.rentalId), reachedWaitFor: false });
      }
    }),
  );

  server.registerTool(
    'list_rentals',
    {
      title: 'List rentals',
      description: "The key's rentals, newest first; pass nextCursor back as cursor for the next page.",
      inputSchema: { limit: z.number().int().min(1).max(100).optional(), cursor: z.string().max(500).optional() },
      outputSchema: { rentals: z.array(s.rental), nextCursor: z.string().nullable() },
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true },
    },
    wrap('list_rentals', {}, async (a: { limit?: number; cursor?: string }) => {
      const page = await deps.client().listRentals(a);
      return success({ rentals: page.data, nextCursor: page.nextCursor });
    }),
  );

  server.registerTool(
    'reveal_ssh_credentials',
    {
      title: 'Reveal SSH credentials',
      description: 'SSH host, port, user and private key of an ACTIVE rental. Each call is audited. The private key is a secret: save it to a 0600 file; never echo it.',
      inputSchema: { id: s.rentalOrDeploymentId },
      outputSchema: { credentials: s.credentials },
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true },
    },
    wrap('reveal_ssh_credentials', {}, async (a: { id: string }) => {
      const client = deps.client();
      const { deploymentId } = await client.resolve(a.id);
      return success({ credentials: await client.revealCredentials(deploymentId) });
    }),
  );

  server.registerTool(
    'terminate_deployment',
    {
      title: 'Terminate a rental',
      description: `Destroys the machine (irreversible; everything on it is lost) and stops charges. Accepts a rental or deployment id. With waitSeconds (max ${MAX_WAIT_SECONDS}) waits for verified destruction (status TERMINATED, endedAt set).`,
      inputSchema: { id: s.rentalOrDeploymentId, waitSeconds: z.number().int().min(1).max(MAX_WAIT_SECONDS).optional() },
      outputSchema: { accepted: z.boolean(), rental: s.rental },
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: true },
    },
    wrap('terminate_deployment', {}, async (a: { id: string; waitSeconds?: number }) => {
      const client = deps.client();
      const { rentalId, deploymentId } = await client.resolve(a.id);
      const { accepted } = await client.terminate(deploymentId);
      if (a.waitSeconds) {
        try {
          return success({ accepted, rental: await client.waitForRental(rentalId, { until: 'TERMINATED', timeoutMs: a.waitSeconds * 1000, intervalMs: 1000 }) });
        } catch (err) {
          if ((err as Error).name !== 'GprTimeoutError') throw err;
        }
      }
      return success({ accepted, rental: await client.getRental(rentalId) });
    }),
  );
}
