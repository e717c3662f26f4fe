import { formatCents, type GprEvent } from '@gpu-rental/sdk';
import type { Command } from 'commander';
import type { Ctx } from '../context.js';
import { redactSecrets, table, UsageError } from '../output.js';

type EventData = {
  rentalId?: string;
  status?: string;
  phase?: string | null;
  failureCode?: string | null;
  balance?: { creditsMinor?: number };
  amountMinor?: number;
};

/** What an event says in a few words: the rental and its status, or the money. */
export function eventSummary(e: GprEvent): string {
  const d = e.data as EventData;
  if (d.rentalId) return `rental ${d.rentalId} ${d.status ?? ''}${d.failureCode ? ` (${d.failureCode})` : ''}`.trim();
  const parts: string[] = [];
  if (typeof d.amountMinor === 'number') parts.push(`+${formatCents(d.amountMinor)}`);
  if (typeof d.balance?.creditsMinor === 'number') parts.push(`credits ${formatCents(d.balance.creditsMinor)}`);
  return parts.join(', ');
}

/** One line per event: id, time, type, summary. */
const eventLine = (e: GprEvent) => `${e.id}  ${e.createdAt}  ${e.type}  ${eventSummary(e)}\n`;

export function eventCommands(program: Command, ctx: Ctx): void {
  program
    .command('events')
    .description(
      'Your events (rentals starting, running, failing, ending; credits): a page after --after, or --follow them as they happen',
    )
    .option(
      '--after <id>',
      'events after this id (a previous listing prints the next one; 0: from the start); without it, the newest page (with --follow: from now on)',
    )
    .option('--limit <n>', 'how many in a page (1-100, default 50)')
    .option(
      '--follow',
      'keep printing events as they happen (the event stream, reconnecting with the last id) until interrupted',
    )
    .action(async (o: { after?: string; limit?: string; follow?: boolean }) => {
      if (o.after !== undefined && !/^\d+$/.test(o.after))
        throw new UsageError('--after takes an event id (digits), e.g. from `gpr events`.');
      const limit = o.limit === undefined ? undefined : Number(o.limit);
      if (limit !== undefined && !(Number.isInteger(limit) && limit >= 1 && limit <= 100))
        throw new UsageError('--limit must be a whole number from 1 to 100.');
      const client = ctx.client();
      if (!o.follow) {
        const page = await client.events({ after: o.after, limit });
        ctx.out(
          page,
          () =>
            (page.data.length === 0
              ? 'No events after this point.\n'
              : table(
                  ['id', 'at', 'type', 'what'],
                  page.data.map((e) => [e.id, e.createdAt, e.type, eventSummary(e)]),
                )) + `Next: gpr events --after ${page.nextAfter}\n`,
        );
        return;
      }
      // Follow: one line per event (one JSON object per line with --json), until Ctrl-C.
      const stop = new AbortController();
      const onSignal = () => stop.abort();
      process.once('SIGINT', onSignal);
      process.once('SIGTERM', onSignal);
      if (!ctx.json) process.stderr.write(`Following events${o.after ? ` after ${o.after}` : ''}; Ctrl-C to stop.\n`);
      try {
        for await (const e of client.streamEvents({ after: o.after, signal: stop.signal })) {
          process.stdout.write(redactSecrets(ctx.json ? `${JSON.stringify(e)}\n` : eventLine(e)));
        }
      } finally {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
      }
    });
}
