import {
  ACTIVE_MEANS,
  checkedId,
  checkedSshTarget,
  type GprClient,
  type MachineSettings,
  type RentalStatus,
  sshCommandLine,
  writeSshKeyFiles,
} from '@gpu-rental/sdk';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import {
  containsSecret,
  failure,
  guardRefusal,
  type Guarded,
  keyRefusal,
  redact,
  refusal,
  secretOutputRefusal,
  success,
} from './guard.js';
import {
  type CallExtra,
  nextStep,
  progressReporter,
  type RentalTarget,
  targetId,
  targetRefusal,
} from './rental-steps.js';
import * as s from './schemas.js';

export interface ToolDeps {
  client: () => GprClient;
  /** GPR_MCP_ALLOW_SPEND=1: tools that spend money, destroy a machine or open SSH access may run. */
  allowSpend: boolean;
  /** GPR_MCP_ALLOW_SECRETS=1: reveal_ssh_credentials may return the private key itself when asked to. */
  allowSecrets: boolean;
  token?: string;
  /**
   * Makes a token this server just received (the signup tool's) the one it calls with from now
   * on, and stores it in the config file (mode 0600) for later runs; answers the file's path.
   */
  adoptToken: (token: string) => string;
  log: (line: string) => void;
}

const MAX_WAIT_SECONDS = 120;

interface CreateRentalArgs {
  offerId?: string;
  gpuModel?: string;
  gpuCount?: 1 | 2 | 4 | 8;
  maxHourlyPriceMinor?: number;
  budgetMinor?: number;
  machine?: MachineSettings;
  terminateAfterSeconds?: number;
  waitForCapacitySeconds?: number;
  idempotencyKey?: string;
}

/** The secrets a create_rental call carries: its variable values and its script. */
const rentalSecrets = (a: CreateRentalArgs): string[] => [
  ...Object.values(a.machine?.env ?? {}),
  ...(a.machine?.startupScript ? [a.machine.startupScript] : []),
];

/**
 * Registers the eleven tools. Every handler refuses secret-looking input and never returns the token;
 * a result carrying a private key is withheld unless the call asked for it on a server allowed to.
 */
export function registerTools(server: McpServer, deps: ToolDeps): void {
  const wrap =
    <A>(
      name: string,
      opts: { guarded?: Guarded; keyInResult?: (args: A) => boolean; secretsIn?: (args: A) => string[] },
      fn: (args: A, extra?: CallExtra) => Promise<CallToolResult>,
    ) =>
    async (args: A, extra?: CallExtra): Promise<CallToolResult> => {
      // The token and anything the call sent as a secret (variable values, a script) never come back.
      const hidden = [...(deps.token ? [deps.token] : []), ...(opts.secretsIn?.(args) ?? [])];
      if (containsSecret(args)) {
        deps.log(`${name}: refused secret-looking input`);
        return refusal(
          'The input looks like a private key or an API token. Never pass secrets to tools; nothing was sent.',
        );
      }
      if (opts.guarded && !deps.allowSpend) {
        deps.log(`${name}: refused (read-only)`);
        return guardRefusal(name, opts.guarded);
      }
      try {
        const result = redact(await fn(args, extra), hidden);
        if (!(deps.allowSecrets && opts.keyInResult?.(args)) && containsSecret(result)) {
          deps.log(`${name}: withheld a secret-looking result`);
          return secretOutputRefusal();
        }
        deps.log(`${name}: ok`);
        return result;
      } catch (err) {
        const result = redact(failure(err), hidden);
        deps.log(`${name}: ${(err as { code?: string }).code ?? 'error'}`);
        return result;
      }
    };

  server.registerTool(
    'list_gpus',
    {
      title: 'List GPU models',
      description:
        'GPU models on offer now, with counts and the price range per hour (USD cents for the whole machine) and the cheapest offer id. No account needed.',
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
      description:
        'Current offers, cheapest first. Filter by GPU name (substring, e.g. "H100"), price ceiling in cents per hour, GPU count. Offer ids change with the inventory.',
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
      description:
        "The account's credits (cents), the key's limits and remaining budget, and billing: if billing.budgetRequired is true, create_rental needs budgetMinor of at least 500.",
      inputSchema: {},
      outputSchema: { account: s.account },
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true },
    },
    wrap('get_account', {}, async () => success({ account: await deps.client().me() })),
  );

  server.registerTool(
    'signup',
    {
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
        maxConcurrentDeployments: z
          .number()
          .int()
          .min(1)
          .max(1000)
          .optional()
          .describe('rentals the key may run at once'),
      },
      outputSchema: { account: s.account, configPath: z.string(), next: z.string() },
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    },
    wrap(
      'signup',
      {},
      async (a: {
        name?: string;
        maxPerRentalMinor?: number;
        budgetLimitMinor?: number;
        maxConcurrentDeployments?: number;
      }) => {
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
    ),
  );

  server.registerTool(
    'create_topup_link',
    {
      title: 'Create a top-up payment link',
      description:
        'Creates a hosted card payment link for a HUMAN to add credits (amountMinor 500-50000 cents). Only their payment credits the account. ' +
        'Spending tool: needs a server started with GPR_MCP_ALLOW_SPEND=1; when refused, ask a human to run `gpr topup <usd>`.',
      inputSchema: {
        amountMinor: z.number().int().min(500).max(50000).describe('USD cents'),
        idempotencyKey: z
          .string()
          .min(1)
          .max(128)
          .optional()
          .describe('reuse to get the same link back; generated when absent'),
      },
      outputSchema: { topup: s.topup, idempotencyKey: z.string() },
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    },
    wrap('create_topup_link', { guarded: 'spends' }, async (a: { amountMinor: number; idempotencyKey?: string }) => {
      const key = a.idempotencyKey ?? crypto.randomUUID();
      return success({ topup: await deps.client().createTopup(a.amountMinor, key), idempotencyKey: key });
    }),
  );

  server.registerTool(
    'create_rental',
    {
      title: 'Rent a GPU machine',
      description:
        "Starts a rental paid from credits: give offerId, OR gpuModel + gpuCount + maxHourlyPriceMinor. budgetMinor (cents, the most this rental may spend) is optional unless get_account shows billing.budgetRequired; without it a credit rental runs until terminated, a lease ends or the key's limits stop it. " +
        'Optional: machine (image, env, startupScript, ports, diskGb: what runs on it; list_offers shows what each offer can take), terminateAfterSeconds (a lease counted from ACTIVE), ' +
        'and with gpuModel waitForCapacitySeconds (stay PENDING in phase waiting_for_capacity until an eligible offer appears). env values and the script are secrets: never returned, never logged. ' +
        `Returns at once with status PENDING; call get_rental with its rentalId and waitFor ["ACTIVE", "FAILED"]. ${ACTIVE_MEANS} ` +
        'To retry after an error, pass the returned idempotencyKey again so no second machine is rented. Spending tool: needs a server started with GPR_MCP_ALLOW_SPEND=1; when refused, ask a human to rent with `gpr rent`.',
      inputSchema: {
        offerId: z.string().optional().describe('an exact offer id from list_offers'),
        gpuModel: z.string().min(1).max(100).optional().describe('e.g. "H100 SXM"'),
        gpuCount: z.union([z.literal(1), z.literal(2), z.literal(4), z.literal(8)]).optional(),
        maxHourlyPriceMinor: z
          .number()
          .int()
          .min(1)
          .optional()
          .describe('USD cents per hour for the whole machine; never exceeded'),
        budgetMinor: z
          .number()
          .int()
          .min(1)
          .optional()
          .describe(
            'USD cents: spending cap for this rental; required (at least 500) when get_account shows billing.budgetRequired',
          ),
        machine: s.machineSettings.optional(),
        terminateAfterSeconds: z
          .number()
          .int()
          .min(60)
          .max(31_536_000)
          .optional()
          .describe(
            "lease: terminated this many seconds after it becomes ACTIVE (at most the offer's maximumDurationSeconds and the key's maxRentalSeconds, which applies when absent)",
          ),
        waitForCapacitySeconds: z
          .number()
          .int()
          .min(60)
          .max(86_400)
          .optional()
          .describe(
            'with gpuModel only: wait up to this long for an eligible offer instead of failing; then NO_CAPACITY',
          ),
        idempotencyKey: z.string().min(1).max(128).optional().describe('generated and returned when absent'),
      },
      outputSchema: { rental: s.rental, idempotencyKey: z.string() },
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    },
    wrap('create_rental', { guarded: 'spends', secretsIn: rentalSecrets }, async (a: CreateRentalArgs) => {
      if (Boolean(a.offerId) === Boolean(a.gpuModel))
        return refusal('Give exactly one of offerId or gpuModel (with gpuCount and maxHourlyPriceMinor).');
      if (a.gpuModel && (!a.gpuCount || !a.maxHourlyPriceMinor))
        return refusal('gpuModel needs gpuCount and maxHourlyPriceMinor.');
      if (a.offerId && a.waitForCapacitySeconds !== undefined)
        return refusal(
          'waitForCapacitySeconds needs gpuModel: an exact offer cannot wait for capacity. Rent by gpuModel to wait, or leave it out.',
        );
      const key = a.idempotencyKey ?? crypto.randomUUID();
      const extra = {
        ...(a.budgetMinor === undefined ? {} : { budgetMinor: a.budgetMinor }),
        ...(a.machine ? { machine: a.machine } : {}),
        ...(a.terminateAfterSeconds === undefined ? {} : { terminateAfterSeconds: a.terminateAfterSeconds }),
      };
      const body = a.offerId
        ? { offerId: a.offerId, ...extra }
        : {
            gpuModel: a.gpuModel!,
            gpuCount: a.gpuCount!,
            maxHourlyPriceMinor: a.maxHourlyPriceMinor!,
            ...extra,
            ...(a.waitForCapacitySeconds === undefined ? {} : { waitForCapacitySeconds: a.waitForCapacitySeconds }),
          };
      return success({ rental: await deps.client().createRental(body, key), idempotencyKey: key });
    }),
  );

  server.registerTool(
    'get_rental',
    {
      title: 'Get a rental',
      description:
        `One rental by rentalId (a deploymentId works too): status, phase while it starts, endpoints and endsAt once ACTIVE, and next (what to do now). With waitFor (statuses, e.g. ["ACTIVE", "FAILED"]), waits up to waitSeconds (max ${MAX_WAIT_SECONDS}) until the status is one of them, answering within a second of the change, and returns the rental as it is then (reachedWaitFor says whether it got there; call again to keep waiting; each change of status is sent as a progress notification when the call asks for progress: ` +
        `a rental in phase waiting_for_capacity may wait until its waitForCapacityUntil). ${ACTIVE_MEANS}`,
      inputSchema: {
        rentalId: s.rentalOrDeploymentId,
        waitFor: s.waitFor.optional(),
        waitSeconds: z.number().int().min(1).max(MAX_WAIT_SECONDS).optional().describe('default 60'),
      },
      outputSchema: { rental: s.rental, reachedWaitFor: z.boolean().optional(), next: z.string() },
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true },
    },
    wrap(
      'get_rental',
      {},
      async (a: { rentalId: string; waitFor?: RentalStatus | RentalStatus[]; waitSeconds?: number }, extra) => {
        const client = deps.client();
        const rental = await client.findRental(a.rentalId);
        if (!a.waitFor) return success({ rental, next: nextStep(rental) });
        const statuses = Array.isArray(a.waitFor) ? a.waitFor : [a.waitFor];
        const progress = progressReporter(extra);
        try {
          // Waiting reads: the service holds each read until the status changes, so nothing polls.
          const done = await client.waitFor(rental.rentalId, statuses, {
            timeoutMs: (a.waitSeconds ?? 60) * 1000,
            onPhase: progress.report,
          });
          await progress.sent();
          return success({ rental: done, reachedWaitFor: true, next: nextStep(done) });
        } catch (err) {
          if ((err as Error).name !== 'GprTimeoutError' && (err as Error).name !== 'GprRentalStateError') throw err;
          await progress.sent();
          const now = await client.getRental(rental.rentalId);
          return success({ rental: now, reachedWaitFor: false, next: nextStep(now) });
        }
      },
    ),
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
    'list_events',
    {
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
    },
    wrap('list_events', {}, async (a: { after?: string; limit?: number }) => {
      const page = await deps.client().events(a);
      return success({ events: page.data, nextAfter: page.nextAfter });
    }),
  );

  server.registerTool(
    'reveal_ssh_credentials',
    {
      title: 'Reveal SSH credentials',
      description:
        'SSH access to an ACTIVE rental: host, port, user, keyFile (the private key saved by this server with mode 0600) and sshCommand, ready to run in a shell ' +
        '(append a remote command, e.g. `nvidia-smi`). The key itself is not returned: use keyFile. Each call is audited; the API key needs the `manage` scope. ' +
        'Needs a server started with GPR_MCP_ALLOW_SPEND=1; includePrivateKey also needs GPR_MCP_ALLOW_SECRETS=1. When refused, ask a human to connect with `gpr ssh <rentalId>`.',
      inputSchema: {
        ...s.rentalTarget,
        includePrivateKey: z
          .boolean()
          .optional()
          .describe(
            'also return the private key text (a secret: never print or log it); refused unless the server has GPR_MCP_ALLOW_SECRETS=1. Prefer keyFile.',
          ),
      },
      outputSchema: { credentials: s.credentials },
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true },
    },
    wrap(
      'reveal_ssh_credentials',
      { guarded: 'reveals', keyInResult: (a) => a.includePrivateKey === true },
      async (a: RentalTarget & { includePrivateKey?: boolean }) => {
        if (a.includePrivateKey && !deps.allowSecrets) return keyRefusal();
        const id = targetId(a);
        if (id === null) return targetRefusal('reveal_ssh_credentials');
        const client = deps.client();
        const resolved = await client.resolve(id);
        checkedId('rentalId', resolved.rentalId);
        const deploymentId = checkedId('deploymentId', resolved.deploymentId);
        const revealed = await client.revealCredentials(deploymentId);
        // Only checked fields and paths built here reach the model: not the service's file name or command line.
        const target = checkedSshTarget(revealed, deploymentId);
        const files = writeSshKeyFiles(target, revealed.privateKey);
        const credentials = {
          ...target,
          keyFile: files.keyFile,
          knownHostsFile: files.knownHostsFile,
          // A model's shell has no terminal to answer a password prompt: fail instead of hanging.
          sshCommand: sshCommandLine(target, files, { batch: true }),
          ...(a.includePrivateKey ? { privateKey: revealed.privateKey } : {}),
        };
        return success({ credentials });
      },
    ),
  );

  server.registerTool(
    'terminate_deployment',
    {
      title: 'Terminate a rental',
      description:
        `Destroys the machine (irreversible; everything on it is lost) and stops charges. Accepts a rental or deployment id. With waitSeconds (max ${MAX_WAIT_SECONDS}) waits for verified destruction (status TERMINATED, endedAt set). ` +
        'Destructive tool: needs a server started with GPR_MCP_ALLOW_SPEND=1 and the `manage` scope; when refused, ask a human to run `gpr terminate <rentalId> --wait`.',
      inputSchema: { ...s.rentalTarget, waitSeconds: z.number().int().min(1).max(MAX_WAIT_SECONDS).optional() },
      outputSchema: {
        accepted: z.boolean(),
        status: z.string(),
        message: z.string(),
        rental: s.rental,
        next: z.string(),
      },
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: true },
    },
    wrap('terminate_deployment', { guarded: 'destroys' }, async (a: RentalTarget & { waitSeconds?: number }) => {
      const id = targetId(a);
      if (id === null) return targetRefusal('terminate_deployment');
      const client = deps.client();
      const { rentalId, deploymentId } = await client.resolve(id);
      // status and message as the terminate call answered: a repeat, or one already finished, says so.
      const { accepted, status, message } = await client.terminate(deploymentId);
      if (a.waitSeconds && status !== 'TERMINATED' && status !== 'FAILED') {
        try {
          const ended = await client.waitForRental(rentalId, { until: 'TERMINATED', timeoutMs: a.waitSeconds * 1000 });
          return success({ accepted, status, message, rental: ended, next: nextStep(ended) });
        } catch (err) {
          if ((err as Error).name !== 'GprTimeoutError') throw err;
        }
      }
      const rental = await client.getRental(rentalId);
      return success({ accepted, status, message, rental, next: nextStep(rental) });
    }),
  );
}
