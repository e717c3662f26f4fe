import { parseArgs } from 'node:util';
import { systemClock } from '../clock.js';
import type { Config } from '../config.js';
import { createDataSource } from '../db/data-source.js';
import { createLogger } from '../logger.js';
import { LABEL_PREFIX } from '../modules/rentals/lifecycle/labels.js';
import type { ProviderCheck } from '../providers/provider-check.js';
import { checkProviders, type ProviderCheckEntry, type ProviderCheckReport } from '../providers/provider-checks.js';
import { createProviderRegistry } from '../providers/provider-registry.js';
import { formatUsd } from '../vocabulary/money.js';

/** The arguments after `owner providers`. */
export const CHECK_SYNOPSIS = 'check [--json]';

/** What `owner providers check` does, for the family's usage text. */
export const CHECK_ABOUT = `whether each configured cloud is usable, through read-only calls only
  (nothing is created, registered or deleted): credentials accepted or the exact refusal, the
  account's balance where the cloud tells it, offers listed and asks dropped per reason, SSH key
  registration (Lambda), each call's time, and whether the edge accepted our User-Agent. One block
  per cloud, then one line per problem (stderr) saying what to change; --json prints the report.
  Exit status 0 only when every configured cloud is usable, 1 otherwise.`;

/** Where the command writes: the owner command's `CommandIo`, by shape. */
export interface CheckIo {
  out: (text: string) => void;
  err: (text: string) => void;
}

const pad = (label: string) => `  ${label.padEnd(12)}`;

function offersLine(c: ProviderCheck): string {
  const o = c.offers;
  const drops = Object.entries(o.dropped)
    .sort((a, b) => b[1] - a[1])
    .map(([code, n]) => `${code} ${n}`)
    .join(', ');
  return `${o.parsed} listed of ${o.considered} asks${drops ? `; dropped: ${drops}` : ''}${o.detail ? ` (${o.detail})` : ''}`;
}

function balanceLine(c: ProviderCheck): string {
  const b = c.balance;
  if (!b) return 'not told by this cloud';
  if (b.amountMinor === null) return b.detail;
  return `${b.currency === 'USD' ? formatUsd(b.amountMinor) : `${b.amountMinor} ${b.currency} minor units`}: ${b.detail}`;
}

/** One cloud's block of the text report. */
function entryBlock(e: ProviderCheckEntry): string {
  const head = `${e.id}: ${!e.supported ? 'check not supported by its plugin' : e.usable ? 'usable' : 'NOT USABLE'}  (${e.ms} ms)`;
  const c = e.check;
  if (!c) return `${head}\n`;
  const lines = [head];
  const cred = c.credentials;
  lines.push(
    `${pad('credentials')}${cred.accepted ? 'accepted' : `refused (${cred.errorClass ?? 'unknown'})`}: ${cred.detail}`,
  );
  lines.push(`${pad('balance')}${balanceLine(c)}`);
  lines.push(`${pad('offers')}${offersLine(c)}`);
  if (c.sshKeys)
    lines.push(`${pad('ssh keys')}${c.sshKeys.possible ? 'possible' : 'NOT possible'}: ${c.sshKeys.detail}`);
  const ua = c.userAgent;
  lines.push(
    `${pad('user agent')}${ua.sent === null ? 'none sent' : `"${ua.sent}"`} ${ua.accepted ? 'accepted' : ua.fix ? 'REFUSED' : 'not seen'}: ${ua.detail}`,
  );
  for (const call of c.calls)
    lines.push(
      `${pad('call')}${call.name}  ${call.status ?? (call.ok ? '-' : 'no answer')}  ${call.ms} ms  ${call.ok ? 'ok' : `${call.errorClass}: ${call.detail}`}`,
    );
  for (const w of e.warnings) lines.push(`${pad('warning')}${w}`);
  return `${lines.join('\n')}\n`;
}

/** The text report: one block per cloud, then the verdict. */
export function formatCheckReport(r: ProviderCheckReport): string {
  const blocks = r.providers.map(entryBlock).join('\n');
  const verdict = r.usable
    ? `Every configured cloud is usable (${r.providers.length}).`
    : `${r.problems.length} problem${r.problems.length === 1 ? '' : 's'}: ${r.providers
        .filter((p) => !p.usable)
        .map((p) => p.id)
        .join(', ')} not usable (each problem is a line on stderr).`;
  return `${blocks}\n${verdict}\n`;
}

/**
 * `owner providers check [--json]`, in the owner process: builds the provider registry from the
 * configuration as main does and runs every provider's read-only check. It needs no database: the
 * plugins get a data source that never connects (no check reads or writes one). Secrets never
 * reach the output: the plugins' clients take the key out of every answer, and no answer's body
 * is printed. Exit status 0 when every configured cloud is usable, 1 when one is not (each problem
 * a line on stderr) or the providers cannot be loaded, 2 for a usage mistake.
 */
export async function runProvidersCheck(argv: string[], config: Config, io: CheckIo): Promise<number> {
  let json: boolean;
  try {
    const { values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: { json: { type: 'boolean', default: false } },
    });
    json = values.json === true;
  } catch (err) {
    io.err(`${(err as Error).message}\n\nUsage: owner providers ${CHECK_SYNOPSIS}\n`);
    return 2;
  }
  // The report is the command's output; the service's log shows only what went wrong, unless asked for more.
  const logger = createLogger(config.logLevel === 'info' ? 'warn' : config.logLevel, { write: (line) => io.err(line) });
  let registry;
  try {
    registry = await createProviderRegistry(config.providers, {
      logger: logger.child({ component: 'provider' }),
      clock: systemClock,
      dataSource: createDataSource(config.db.url, 1, []),
      production: config.nodeEnv === 'production',
      labelPrefix: LABEL_PREFIX,
    });
  } catch (err) {
    io.err(`The providers could not be loaded: ${(err as Error).message}\n`);
    return 1;
  }
  let report: ProviderCheckReport;
  try {
    report = await checkProviders(registry.registered(), { now: () => systemClock.now() });
  } finally {
    await registry.close();
  }
  io.out(json ? `${JSON.stringify(report)}\n` : formatCheckReport(report));
  for (const p of report.problems) io.err(`${p}\n`);
  return report.usable ? 0 : 1;
}
