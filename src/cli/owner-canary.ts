import { parseArgs } from 'node:util';
import { systemClock } from '../clock.js';
import type { Config } from '../config.js';
import { createServices } from '../container.js';
import { createDataSource, migrate } from '../db/data-source.js';
import { entities } from '../entities.js';
import { startJobWorker } from '../jobs/agenda.js';
import { createLogger } from '../logger.js';
import { CANARY_EXPECTED_MINUTES } from '../modules/canary/canary-offer.js';
import { formatCanaryReport, phaseLine, type CanaryReport } from '../modules/canary/canary-report.js';
import type { CanarySignals } from '../modules/canary/canary-deps.js';
import { runCanary } from '../modules/canary/canary.service.js';
import { KEY_LIMIT_MAXIMUMS } from '../modules/keys/key-limits.js';
import { LABEL_PREFIX } from '../modules/rentals/lifecycle/labels.js';
import { createProviderRegistry } from '../providers/provider-registry.js';
import { MIN_BUDGET_MINOR } from '../vocabulary/limits.js';
import { formatUsd, notDollarsMessage, parseUsd } from '../vocabulary/money.js';
import { reachDatabase } from './database-reach.js';

/** The canary's time bound when --timeout-minutes is not given: a slow cloud boots and pulls its image in well under it. */
export const CANARY_TIMEOUT_MINUTES = { default: 30, minimum: 1, maximum: 1440 } as const;

/** The subcommand's line in `owner providers` usage. */
export const CANARY_SYNOPSIS =
  'canary --provider <id> --max-spend <dollars> [--gpu <model>] [--timeout-minutes <m>] [--json]';

/** What it does, for the family's usage text (`owner providers canary --help` says all). */
export const CANARY_ABOUT = `proves one real rent, SSH, GPU and destroy cycle on your cloud account,
  within --max-spend (required: the cap on real money), on the service's internal canary account;
  prints each phase with its time, the GPUs nvidia-smi -L lists, the cost and the teardown receipt.
  Ctrl-C ends the machine before exiting. owner providers canary --help says more.`;

export const CANARY_USAGE = `Usage: owner providers canary --provider <id> --max-spend <dollars> [--gpu <model>]
                              [--timeout-minutes <m>] [--json]

Proves one real rent, SSH, GPU and destroy cycle on your own cloud account: rents the cheapest
offer of the provider whose price keeps ${CANARY_EXPECTED_MINUTES} minutes within --max-spend, through the same rental
path an agent's POST /api/v1/rentals takes, on the service's internal canary account (funded for
exactly --max-spend by a ledger entry, so no customer's balance is touched); waits for ACTIVE;
runs nvidia-smi -L over SSH with the rental's key; terminates and waits for TERMINATED with
verified destruction; reports the phases and their times, the GPUs, what it cost (from the
ledger) and how it ended. Each phase is a line on stderr as it happens; the report goes to stdout.

It works whether or not the service runs: it runs a job worker of its own while it lasts.
The rental's budget is --max-spend, so the service itself ends it at the cap. Ctrl-C (or SIGTERM)
ends the machine and waits for its verified destruction before exiting; a second one leaves it
ending in the service. Exit status: 0 only for a full cycle; 1 when something failed (the
machine is ended all the same, unless the report says otherwise); 2 for a usage mistake; 130 when
interrupted.

Options:
  --provider <id>          a configured cloud (PROVIDERS), e.g. vast, runpod, lambda, local
  --max-spend <dollars>    required: the cap on real money this canary may spend, e.g. 5 or 7.50
                           (at least ${formatUsd(MIN_BUDGET_MINOR)}, the smallest budget of any rental)
  --gpu <model>            only offers of this GPU model or family, e.g. H100 or "RTX 4090"
  --timeout-minutes <m>    the bound on reaching ACTIVE and listing the GPUs, and again on the
                           teardown, ${CANARY_TIMEOUT_MINUTES.minimum} to ${CANARY_TIMEOUT_MINUTES.maximum} (default ${CANARY_TIMEOUT_MINUTES.default}); the rental's lease is the same
  --json                   print the report as JSON

  npm run --silent owner -- providers canary --provider vast --max-spend 5 --json | jq .costMinor`;

/** The canary's request, checked. */
export interface CanaryArgs {
  provider: string;
  maxSpendMinor: number;
  gpu: string | null;
  timeoutMinutes: number;
  json: boolean;
}

/** The arguments after `owner providers canary`, or what is wrong with them (a usage mistake, exit status 2). */
export function parseCanaryArgs(argv: string[]): CanaryArgs | { usage: string } {
  let values;
  try {
    values = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        provider: { type: 'string' },
        'max-spend': { type: 'string' },
        gpu: { type: 'string' },
        'timeout-minutes': { type: 'string' },
        json: { type: 'boolean', default: false },
      },
    }).values;
  } catch (err) {
    return { usage: (err as Error).message };
  }
  const provider = values.provider?.trim() ?? '';
  if (!provider) return { usage: '--provider is required: the id of a configured cloud (PROVIDERS), e.g. vast.' };
  const rawSpend = values['max-spend'];
  if (rawSpend === undefined)
    return {
      usage:
        '--max-spend is required: it is the cap on real money this canary may spend on your cloud account, in dollars ' +
        '(e.g. --max-spend 5). The canary refuses to rent without one.',
    };
  const maxSpendMinor = parseUsd(rawSpend);
  if (maxSpendMinor === null) return { usage: `--max-spend: ${notDollarsMessage(rawSpend)}.` };
  if (maxSpendMinor < MIN_BUDGET_MINOR)
    return {
      usage: `--max-spend must be at least ${formatUsd(MIN_BUDGET_MINOR)}, the smallest budget of any rental; got ${formatUsd(maxSpendMinor)}.`,
    };
  if (maxSpendMinor > KEY_LIMIT_MAXIMUMS.maxPerRentalMinor)
    return { usage: `--max-spend must be at most ${formatUsd(KEY_LIMIT_MAXIMUMS.maxPerRentalMinor)}.` };
  const gpu = values.gpu?.trim() || null;
  if (gpu !== null && gpu.length > 100) return { usage: '--gpu must be a GPU model of at most 100 characters.' };
  const rawTimeout = values['timeout-minutes'];
  let timeoutMinutes: number = CANARY_TIMEOUT_MINUTES.default;
  if (rawTimeout !== undefined) {
    timeoutMinutes = /^\d{1,5}$/.test(rawTimeout.trim()) ? Number(rawTimeout.trim()) : NaN;
    if (!(timeoutMinutes >= CANARY_TIMEOUT_MINUTES.minimum && timeoutMinutes <= CANARY_TIMEOUT_MINUTES.maximum))
      return {
        usage: `--timeout-minutes must be a whole number from ${CANARY_TIMEOUT_MINUTES.minimum} to ${CANARY_TIMEOUT_MINUTES.maximum}, got "${rawTimeout}".`,
      };
  }
  return { provider, maxSpendMinor, gpu, timeoutMinutes, json: Boolean(values.json) };
}

/** The exit status of a report: 0 only for a full cycle. */
export function canaryExitStatus(report: CanaryReport): number {
  if (report.ok) return 0;
  return report.outcome === 'interrupted' || report.outcome === 'left' ? 130 : 1;
}

/** Where a command writes: its report (stdout) and its lines (stderr). */
export interface CanaryIo {
  out: (text: string) => void;
  err: (text: string) => void;
}

/**
 * Stop signals from the terminal: the first SIGINT or SIGTERM aborts `stop` (end the machine, then
 * exit), the second `leave` (stop waiting), a third exits at once. Answers the signals and the
 * function that stops listening.
 */
function terminalSignals(io: CanaryIo): { signals: CanarySignals; release: () => void } {
  const stop = new AbortController();
  const leave = new AbortController();
  let count = 0;
  const on = () => {
    count += 1;
    if (count === 1) {
      io.err(
        'Interrupted: ending the machine and waiting for its verified destruction (interrupt again to leave it ending in the service).\n',
      );
      stop.abort();
    } else if (count === 2) {
      io.err(
        'Interrupted again: the machine is still ending; leaving it to end in the service (the report says which rental).\n',
      );
      leave.abort();
    } else {
      process.exit(130);
    }
  };
  process.on('SIGINT', on);
  process.on('SIGTERM', on);
  return {
    signals: { stop: stop.signal, leave: leave.signal },
    release: () => {
      process.off('SIGINT', on);
      process.off('SIGTERM', on);
    },
  };
}

/**
 * `owner providers canary …` in the owner process: opens the database, builds the service's own
 * services and a job worker of their own (jobs are locked in MySQL, so it runs beside a running
 * service's workers as any worker does), runs the canary, stops what it started. Returns the
 * exit status. Without `signals` it is the terminal's command: it takes SIGINT and SIGTERM while
 * it runs, and ends the process once its callers have its status; `signals` (tests) replaces
 * the terminal's and leaves the process alone.
 */
export async function runCanaryCommand(
  argv: string[],
  config: Config,
  io: CanaryIo,
  options: { signals?: CanarySignals } = {},
): Promise<number> {
  if (argv[0] === 'help' || argv[0] === '--help' || argv[0] === '-h') {
    io.out(`${CANARY_USAGE}\n`);
    return 0;
  }
  const args = parseCanaryArgs(argv);
  if ('usage' in args) {
    io.err(`${args.usage}\n\n${CANARY_USAGE}\n`);
    return 2;
  }
  const configured = config.providers.map((p) => p.id);
  if (!configured.includes(args.provider)) {
    io.err(
      `--provider "${args.provider}" is not configured here (PROVIDERS: ${configured.join(', ') || 'none'}).\n\n${CANARY_USAGE}\n`,
    );
    return 2;
  }
  if (!(await reachDatabase(config, io.err))) return 1;
  // The phases are the command's own lines; the service's log shows only what went wrong, unless asked for more.
  const logger = createLogger(config.logLevel === 'info' ? 'warn' : config.logLevel, { write: (line) => io.err(line) });
  const ds = createDataSource(config.db.url, 5, entities);
  await ds.initialize();
  const terminal = options.signals ? undefined : terminalSignals(io);
  const signals = options.signals ?? terminal!.signals;
  try {
    await migrate(ds);
    const providers = await createProviderRegistry(config.providers, {
      logger: logger.child({ component: 'provider' }),
      clock: systemClock,
      dataSource: ds,
      production: config.nodeEnv === 'production',
      labelPrefix: LABEL_PREFIX,
    });
    const services = createServices({ config, ds, clock: systemClock, logger, providers });
    const worker = await startJobWorker(services);
    let report: CanaryReport;
    try {
      report = await runCanary(
        { ...services, machinePolicy: config.machines },
        {
          provider: args.provider,
          maxSpendMinor: args.maxSpendMinor,
          gpu: args.gpu,
          timeoutMs: args.timeoutMinutes * 60_000,
        },
        signals,
        (p) => io.err(`${phaseLine(p)}\n`),
      );
    } finally {
      // Left ending: the worker need not drain its jobs long; their locks pass to the next worker.
      await worker.stop({ timeoutMs: signals.leave?.aborted ? 5000 : 25_000 });
      await services.eventHub.stop();
      await providers.close();
    }
    io.out(args.json ? `${JSON.stringify(report)}\n` : formatCanaryReport(report));
    return canaryExitStatus(report);
  } finally {
    terminal?.release();
    await ds.destroy();
  }
}
