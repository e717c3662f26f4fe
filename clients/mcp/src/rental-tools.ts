import { ACTIVE_MEANS, type GprApiError, type MachineSettings, type RentalStatus } from '@gpu-rental/sdk';
import { z } from 'zod';
import { creditRefusal, fundingState, topupAnswer, topupFor } from './funding.js';
import { refusal, success } from './guard.js';
import { nextStep, progressReporter, type RentalTarget, targetId, targetRefusal } from './rental-steps.js';
import * as s from './schemas.js';
import { defineTool } from './tool.js';

// A rental's life: renting, watching it start, listing, terminating.

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

export const createRental = defineTool({
  name: 'create_rental',
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
      .describe('with gpuModel only: wait up to this long for an eligible offer instead of failing; then NO_CAPACITY'),
    idempotencyKey: z.string().min(1).max(128).optional().describe('generated and returned when absent'),
  },
  outputSchema: { rental: s.rental, idempotencyKey: z.string() },
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
  guarded: 'spends',
  secretsIn: rentalSecrets,
  run: async (a: CreateRentalArgs, deps, extra) => {
    if (Boolean(a.offerId) === Boolean(a.gpuModel))
      return refusal('Give exactly one of offerId or gpuModel (with gpuCount and maxHourlyPriceMinor).');
    if (a.gpuModel && (!a.gpuCount || !a.maxHourlyPriceMinor))
      return refusal('gpuModel needs gpuCount and maxHourlyPriceMinor.');
    if (a.offerId && a.waitForCapacitySeconds !== undefined)
      return refusal(
        'waitForCapacitySeconds needs gpuModel: an exact offer cannot wait for capacity. Rent by gpuModel to wait, or leave it out.',
      );
    // A call run again after the human saw a top-up link keeps the first round's key.
    const key =
      a.idempotencyKey ?? (topupAnswer(extra) ? fundingState(extra)?.idempotencyKey : undefined) ?? crypto.randomUUID();
    const settings = {
      ...(a.budgetMinor === undefined ? {} : { budgetMinor: a.budgetMinor }),
      ...(a.machine ? { machine: a.machine } : {}),
      ...(a.terminateAfterSeconds === undefined ? {} : { terminateAfterSeconds: a.terminateAfterSeconds }),
    };
    const body = a.offerId
      ? { offerId: a.offerId, ...settings }
      : {
          gpuModel: a.gpuModel!,
          gpuCount: a.gpuCount!,
          maxHourlyPriceMinor: a.maxHourlyPriceMinor!,
          ...settings,
          ...(a.waitForCapacitySeconds === undefined ? {} : { waitForCapacitySeconds: a.waitForCapacitySeconds }),
        };
    try {
      return success({ rental: await deps.client().createRental(body, key), idempotencyKey: key });
    } catch (err) {
      const amountMinor = topupFor(err);
      if (amountMinor === null) throw err;
      return creditRefusal(err as GprApiError, amountMinor, key, deps, extra);
    }
  },
});

export const getRental = defineTool({
  name: 'get_rental',
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
  run: async (a: { rentalId: string; waitFor?: RentalStatus | RentalStatus[]; waitSeconds?: number }, deps, extra) => {
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
});

export const listRentals = defineTool({
  name: 'list_rentals',
  title: 'List rentals',
  description: "The key's rentals, newest first; pass nextCursor back as cursor for the next page.",
  inputSchema: { limit: z.number().int().min(1).max(100).optional(), cursor: z.string().max(500).optional() },
  outputSchema: { rentals: z.array(s.rental), nextCursor: z.string().nullable() },
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true },
  run: async (a, deps) => {
    const page = await deps.client().listRentals(a);
    return success({ rentals: page.data, nextCursor: page.nextCursor });
  },
});

export const terminateDeployment = defineTool({
  name: 'terminate_deployment',
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
  guarded: 'destroys',
  run: async (a: RentalTarget & { waitSeconds?: number }, deps) => {
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
  },
});
