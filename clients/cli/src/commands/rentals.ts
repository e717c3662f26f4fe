import { dollarsToCents, formatCents, type GprClient, type Rental, type RentalRequest, spendCapLine } from '@gpu-rental/sdk';
import type { Command } from 'commander';
import { type Ctx, timeoutMs } from '../context.js';
import { fields, table, UsageError } from '../output.js';

type Extra = { gpuName?: string | null; gpuCount?: number | null; provider?: string | null; terminationReason?: string | null };

/** The human view of one rental: the fields that have a value. */
export function rentalFields(r: Rental): string {
  const x = r as Rental & Extra;
  const rows: [string, unknown][] = [
    ['rental', r.rentalId],
    ['deployment', r.deploymentId],
    ['status', r.status],
    ['gpu', x.gpuName ? `${x.gpuCount ?? 1}x ${x.gpuName}` : null],
    ['provider', x.provider],
    ['billing', r.billingModel],
    ['price/h', formatCents(r.quote.hourlyPriceMinor)],
    ['prepaid', r.quote.totalMinor ? formatCents(r.quote.totalMinor) : null],
    ['ends at', r.deployment?.endsAt],
    ['ended at', r.endedAt],
    ['ended because', x.terminationReason],
    ['failure', r.failureCode ? `${r.failureCode}: ${r.failureReason}` : null],
    ['credit reversal', r.reversalStatus],
  ];
  return fields(rows.filter(([k, v]) => (v !== null && v !== undefined) || k === 'status'));
}

/** Waits for a state with a spinner (TTY) or one line per state change. */
export async function waitWithProgress(ctx: Ctx, client: GprClient, id: string, until: 'ACTIVE' | 'TERMINATED', timeout: number): Promise<Rental> {
  const progress = ctx.progress();
  try {
    return await client.waitForRental(id, { until, timeoutMs: timeout, intervalMs: 1000, onProgress: (r) => progress.update(`rental ${r.status}`) });
  } finally {
    progress.stop();
  }
}

export function rentalCommands(program: Command, ctx: Ctx): void {
  program
    .command('rent')
    .description('Rent a machine: one exact offer, or a GPU model with a price ceiling; --wait until ACTIVE')
    .option('--offer <id>', 'an offer id from `gpr offers`')
    .option('--gpu <model>', 'GPU model, e.g. "H100 SXM"')
    .option('--count <n>', 'GPUs (1, 2, 4 or 8; with --gpu)', '1')
    .option('--max-price <usd>', 'highest price per hour for the whole machine (required with --gpu)')
    .option('--budget <usd>', 'spending ceiling for this rental (required when `gpr whoami` says budget required)')
    .option('--idempotency-key <key>', 'reuse to retry the same rental safely (default: a new one)')
    .option('--wait', 'wait until ACTIVE, showing the state')
    .option('--timeout <seconds>', 'how long --wait waits (default 900)')
    .action(async (o: { offer?: string; gpu?: string; count: string; maxPrice?: string; budget?: string; idempotencyKey?: string; wait?: boolean; timeout?: string }) => {
      if (Boolean(o.offer) === Boolean(o.gpu)) throw new UsageError('Give exactly one of --offer <id> or --gpu <model>.');
      let body: RentalRequest;
      const budget = o.budget === undefined ? {} : { budgetMinor: dollarsToCents(o.budget) };
      if (o.offer) {
        body = { offerId: o.offer, ...budget };
      } else {
        if (!o.maxPrice) throw new UsageError('--gpu needs --max-price <usd> (the most you pay per hour).');
        const count = Number(o.count);
        if (![1, 2, 4, 8].includes(count)) throw new UsageError('--count must be 1, 2, 4 or 8.');
        body = { gpuModel: o.gpu!, gpuCount: count as 1, maxHourlyPriceMinor: dollarsToCents(o.maxPrice), ...budget };
      }
      const client = ctx.client();
      const key = o.idempotencyKey ?? crypto.randomUUID();
      let rental = await client.createRental(body, key);
      if (!ctx.json) process.stderr.write(`Rental ${rental.rentalId} created (${rental.status}); idempotency key ${key}.\n`);
      // The cap that will stop the machine is said up front, whichever of budget or key set it.
      const cap = rental.deployment?.spendCapMinor;
      if (!ctx.json && typeof cap === 'number') process.stderr.write(`${spendCapLine(cap, o.budget !== undefined)}\n`);
      if (o.wait) rental = await waitWithProgress(ctx, client, rental.rentalId, 'ACTIVE', timeoutMs(o.timeout, 900));
      ctx.out({ ...rental, idempotencyKey: key }, () =>
        rentalFields(rental) + (rental.status === 'ACTIVE' ? `Connect: gpr ssh ${rental.rentalId}\n` : `Check: gpr status ${rental.rentalId}\n`),
      );
    });

  program
    .command('rentals')
    .description('Your rentals, newest first')
    .option('--limit <n>', 'how many (1-100, default 20)')
    .option('--cursor <cursor>', 'the next page, from a previous listing')
    .action(async (o: { limit?: string; cursor?: string }) => {
      const page = await ctx.client().listRentals({ limit: o.limit === undefined ? undefined : Number(o.limit), cursor: o.cursor });
      ctx.out(page, () =>
        (page.data.length === 0
          ? 'No rentals yet.\n'
          : table(
              ['rental', 'status', 'gpu', 'price/h', 'created', 'ended'],
              page.data.map((r) => {
                const x = r as Rental & Extra;
                return [r.rentalId, r.status, x.gpuName ?? null, formatCents(r.quote.hourlyPriceMinor), r.createdAt, r.endedAt];
              }),
            )) + (page.nextCursor ? `More: gpr rentals --cursor ${page.nextCursor}\n` : ''),
      );
    });

  program
    .command('status <id>')
    .description('One rental (by rental or deployment id)')
    .action(async (id: string) => {
      const { rental } = await ctx.client().resolve(id);
      ctx.out(rental, () => rentalFields(rental));
    });

  program
    .command('terminate <id>')
    .description('Destroy the machine of a rental (irreversible); --wait for verified destruction')
    .option('--wait', 'wait until TERMINATED and print endedAt')
    .option('--timeout <seconds>', 'how long --wait waits (default 600)')
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
