import {
  capacityLine,
  dollarsToCents,
  formatCents,
  formatUsdPerGb,
  formatDuration,
  type GprClient,
  leaseLine,
  type Rental,
  type RentalRequest,
  spendCapLine,
} from '@gpu-rental/sdk';
import type { Command } from 'commander';
import { type Ctx, timeoutMs } from '../context.js';
import { collect, type MachineFlags, machineRequest } from '../machine-flags.js';
import { fields, table, UsageError, warnIfCents } from '../output.js';

/** Where `gpr status --wait` stops: the rental runs, or it has ended. */
const SETTLED: Rental['status'][] = ['ACTIVE', 'TERMINATED', 'FAILED'];

type Extra = {
  gpuName?: string | null;
  gpuCount?: number | null;
  provider?: string | null;
  terminationReason?: string | null;
};

/** The rental's state in a few words: `PROVISIONING (booting)`, `PENDING (waiting_for_capacity until ...)`. */
export function stateLine(r: Rental): string {
  if (!r.phase) return r.status;
  const until = r.phase === 'waiting_for_capacity' && r.waitForCapacityUntil ? ` until ${r.waitForCapacityUntil}` : '';
  return `${r.status} (${r.phase}${until})`;
}

/** The human view of one rental: the fields that have a value; the machine as asked (names and hash only), then its endpoints. */
export function rentalFields(r: Rental): string {
  const x = r as Rental & Extra;
  const m = r.machine;
  const rows: [string, unknown][] = [
    ['rental', r.rentalId],
    ['deployment', r.deploymentId],
    ['status', r.status],
    ['phase', r.phase ? `${r.phase}${r.phaseSince ? ` since ${r.phaseSince}` : ''}` : null],
    ['waits until', r.status === 'PENDING' ? r.waitForCapacityUntil : null],
    ['gpu', x.gpuName ? `${x.gpuCount ?? 1}x ${x.gpuName}` : null],
    ['provider', x.provider],
    ['billing', r.billingModel],
    ['price/h', formatCents(r.quote.hourlyPriceMinor)],
    ['prepaid', r.quote.totalMinor ? formatCents(r.quote.totalMinor) : null],
    ['charged', r.deployment?.usageMinor ? formatCents(r.deployment.usageMinor) : null],
    ['traffic', trafficText(r.deployment?.traffic)],
    ['image', m?.image],
    ['env', m?.envNames?.length ? m.envNames.join(', ') : null],
    ['script sha256', m?.startupScriptSha256],
    ['ports', m?.ports?.length ? m.ports.join(', ') : null],
    ['disk', m?.diskGb ? `${m.diskGb} GB` : null],
    ['lease', r.leaseSeconds ? formatDuration(r.leaseSeconds) : null],
    ['ends at', r.endsAt ?? r.deployment?.endsAt],
    ...(r.endpoints ?? []).map((e): [string, unknown] => ['endpoint', `${e.port} ${e.url}`]),
    ['ended at', r.endedAt],
    ['ended because', x.terminationReason],
    ['failure', r.failureCode ? `${r.failureCode}: ${r.failureReason}` : null],
    ['credit reversal', r.reversalStatus],
  ];
  return fields(rows.filter(([k, v]) => (v !== null && v !== undefined) || k === 'status'));
}

/** A rental's traffic for people: what it moved each way, its per-GB prices and what it cost. */
function trafficText(t: NonNullable<Rental['deployment']>['traffic'] | undefined): string | null {
  if (!t) return null;
  const gb = (bytes: number) => `${(bytes / 2 ** 30).toFixed(2)} GB`;
  return `${gb(t.sentBytes)} sent at ${formatUsdPerGb(t.pricePerGb.upMicroUsd)}, ${gb(t.receivedBytes)} received at ${formatUsdPerGb(t.pricePerGb.downMicroUsd)}: ${formatCents(t.chargedMinor)}`;
}

/** What to run next after showing a rental. */
function nextLine(r: Rental): string {
  if (r.status === 'ACTIVE') return `Connect: gpr ssh ${r.rentalId}\n`;
  if (r.status === 'PENDING' || r.status === 'PROVISIONING') return `Wait: gpr wait ${r.rentalId}\n`;
  return `Check: gpr status ${r.rentalId}\n`;
}

/** Waits for a state with a spinner (TTY) or one line per change of status or phase. */
export async function waitWithProgress(
  ctx: Ctx,
  client: GprClient,
  id: string,
  until: 'ACTIVE' | 'TERMINATED',
  timeout: number | undefined,
): Promise<Rental> {
  const progress = ctx.progress();
  try {
    return await client.waitForRental(id, {
      until,
      timeoutMs: timeout,
      onPhase: (r) => progress.update(`rental ${stateLine(r)}`),
    });
  } finally {
    progress.stop();
  }
}

type RentOptions = MachineFlags & {
  offer?: string;
  gpu?: string;
  count: string;
  maxPrice?: string;
  budget?: string;
  idempotencyKey?: string;
  wait?: boolean;
  timeout?: string;
};

/** The request body of `gpr rent`'s flags; usage errors before anything is sent. */
function rentBody(o: RentOptions): RentalRequest {
  if (Boolean(o.offer) === Boolean(o.gpu)) throw new UsageError('Give exactly one of --offer <id> or --gpu <model>.');
  const budget = o.budget === undefined ? {} : { budgetMinor: dollarsToCents(o.budget) };
  if (o.offer) {
    if (o.waitCapacity !== undefined)
      throw new UsageError(
        '--wait-capacity needs --gpu: an exact offer cannot wait for capacity; rent by GPU model to wait.',
      );
    return { offerId: o.offer, ...budget, ...machineRequest(o) };
  }
  if (!o.maxPrice) throw new UsageError('--gpu needs --max-price <usd> (the most you pay per hour).');
  const count = Number(o.count);
  if (![1, 2, 4, 8].includes(count)) throw new UsageError('--count must be 1, 2, 4 or 8.');
  warnIfCents('--max-price', o.maxPrice);
  return {
    gpuModel: o.gpu!,
    gpuCount: count as 1,
    maxHourlyPriceMinor: dollarsToCents(o.maxPrice),
    ...budget,
    ...machineRequest(o),
  };
}

export function rentalCommands(program: Command, ctx: Ctx): void {
  program
    .command('rent')
    .description(
      'Rent a machine: one exact offer, or a GPU model with a price ceiling; optionally its image, variables, startup script, ports, disk and lease; --wait until ACTIVE',
    )
    .option('--offer <id>', 'an offer id from `gpr offers`')
    .option('--gpu <model>', 'GPU model, e.g. "H100 SXM"')
    .option('--count <n>', 'GPUs (1, 2, 4 or 8; with --gpu)', '1')
    .option('--max-price <usd>', 'highest price per hour for the whole machine (required with --gpu)')
    .option('--budget <usd>', 'spending ceiling for this rental (required when `gpr whoami` says budget required)')
    .option(
      '--image <ref>',
      'container image to run, e.g. pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime (offers with capabilities.customImage)',
    )
    .option(
      '--env <NAME=VALUE>',
      "environment variable of the machine, its script and SSH logins (repeatable); NAME alone passes this shell's $NAME. Values are secrets: never printed",
      collect,
    )
    .option('--env-from <file>', 'NAME=VALUE lines (# comments, blank lines skipped); --env wins for the same name')
    .option(
      '--script <file>',
      'startup script run once after boot as the SSH user (offers with capabilities.startupScript); never printed',
    )
    .option(
      '--port <n>',
      'TCP port to expose over HTTP(S) (repeatable, up to 5); its URL is shown once ACTIVE',
      collect,
    )
    .option('--disk <gb>', "disk size in GB (up to the offer's capabilities.maxDiskGb)")
    .option('--ttl <duration>', 'lease: terminate this long after ACTIVE, e.g. 2h, 90m, 3600s')
    .option(
      '--wait-capacity <duration>',
      'with --gpu: wait up to this long (1m to 24h) for an eligible offer instead of failing, e.g. 30m',
    )
    .option('--idempotency-key <key>', 'reuse to retry the same rental safely (default: a new one)')
    .option('--wait', 'wait until ACTIVE, showing the state and phase')
    .option('--timeout <duration>', 'how long --wait waits (default 15m, after any --wait-capacity)')
    .action(async (o: RentOptions) => {
      const body = rentBody(o);
      const timeout = timeoutMs(o.timeout);
      const client = ctx.client();
      const key = o.idempotencyKey ?? crypto.randomUUID();
      let rental = await client.createRental(body, key);
      if (!ctx.json) {
        process.stderr.write(`Rental ${rental.rentalId} created (${rental.status}); idempotency key ${key}.\n`);
        // The cap and the lease that will stop the machine are said up front, whoever set them.
        const cap = rental.deployment?.spendCapMinor;
        if (typeof cap === 'number') process.stderr.write(`${spendCapLine(cap, o.budget !== undefined)}\n`);
        if (rental.leaseSeconds)
          process.stderr.write(`${leaseLine(rental.leaseSeconds, o.ttl !== undefined, '--ttl')}\n`);
        if (rental.waitForCapacityUntil) process.stderr.write(`${capacityLine(rental.waitForCapacityUntil)}\n`);
      }
      if (o.wait) rental = await waitWithProgress(ctx, client, rental.rentalId, 'ACTIVE', timeout);
      ctx.out({ ...rental, idempotencyKey: key }, () => rentalFields(rental) + nextLine(rental));
    });

  program
    .command('wait <id>')
    .description('Wait until a rental is ACTIVE (by rental or deployment id), showing its phase; then its endpoints')
    .option('--terminated', 'wait until TERMINATED instead')
    .option('--timeout <duration>', 'how long to wait (default 15m, after any wait for capacity)')
    .action(async (id: string, o: { terminated?: boolean; timeout?: string }) => {
      const timeout = timeoutMs(o.timeout);
      const client = ctx.client();
      const { rentalId } = await client.findRental(id);
      const rental = await waitWithProgress(ctx, client, rentalId, o.terminated ? 'TERMINATED' : 'ACTIVE', timeout);
      ctx.out(rental, () => rentalFields(rental) + nextLine(rental));
    });

  program
    .command('rentals')
    .description('Your rentals, newest first')
    .option('--limit <n>', 'how many (1-100, default 20)')
    .option('--cursor <cursor>', 'the next page, from a previous listing')
    .action(async (o: { limit?: string; cursor?: string }) => {
      const page = await ctx
        .client()
        .listRentals({ limit: o.limit === undefined ? undefined : Number(o.limit), cursor: o.cursor });
      ctx.out(
        page,
        () =>
          (page.data.length === 0
            ? 'No rentals yet.\n'
            : table(
                ['rental', 'status', 'gpu', 'price/h', 'created', 'ended'],
                page.data.map((r) => {
                  const x = r as Rental & Extra;
                  return [
                    r.rentalId,
                    r.status,
                    x.gpuName ?? null,
                    formatCents(r.quote.hourlyPriceMinor),
                    r.createdAt,
                    r.endedAt,
                  ];
                }),
              )) + (page.nextCursor ? `More: gpr rentals --cursor ${page.nextCursor}\n` : ''),
      );
    });

  program
    .command('status <id>')
    .description('One rental (by rental or deployment id); --wait until it is ACTIVE, TERMINATED or FAILED')
    .option(
      '--wait',
      'wait (with waiting reads, no polling) until the rental is ACTIVE, TERMINATED or FAILED, showing each change',
    )
    .option('--timeout <duration>', 'how long --wait waits (default 15m, after any wait for capacity)')
    .action(async (id: string, o: { wait?: boolean; timeout?: string }) => {
      const timeout = timeoutMs(o.timeout);
      const client = ctx.client();
      let rental = await client.findRental(id);
      if (o.wait) {
        const progress = ctx.progress();
        try {
          rental = await client.waitFor(rental.rentalId, SETTLED, {
            timeoutMs: timeout,
            onPhase: (r) => progress.update(`rental ${stateLine(r)}`),
          });
        } finally {
          progress.stop();
        }
      }
      ctx.out(rental, () => rentalFields(rental) + nextLine(rental));
    });

  program
    .command('terminate <id>')
    .description('Destroy the machine of a rental (irreversible); --wait for verified destruction')
    .option('--wait', 'wait until TERMINATED and print endedAt')
    .option('--timeout <duration>', 'how long --wait waits (default 600 s; e.g. 10m)')
    .action(async (id: string, o: { wait?: boolean; timeout?: string }) => {
      const client = ctx.client();
      const { rentalId, deploymentId } = await client.resolve(id);
      const accepted = await client.terminate(deploymentId);
      // Nothing to wait for once it has finished; the answer says it already has.
      if (!o.wait || accepted.status === 'TERMINATED' || accepted.status === 'FAILED') {
        ctx.out(accepted, () => `${accepted.message}\nCheck: gpr status ${rentalId}\n`);
        return;
      }
      const done = await waitWithProgress(ctx, client, rentalId, 'TERMINATED', timeoutMs(o.timeout, 600));
      ctx.out(done, () => `Terminated; destruction verified at ${done.endedAt ?? 'unknown (no verified record)'}.\n`);
    });
}
