import { existsSync, readFileSync } from 'node:fs';
import { formatCents, RECEIPT_KEYS_PATH, verifyReceipt, type ReceiptCheck } from '@gpu-rental/sdk';
import type { Command } from 'commander';
import type { Ctx } from '../context.js';
import { EXIT, UsageError } from '../output.js';

const ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Read as JSON: the value, or why it is not one. */
type Read = { ok: true; value: unknown } | { ok: false; reason: string };

/** A JSON file's contents; exit 2 naming the file when it cannot be read at all. */
function readJson(path: string, what: string): Read {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new UsageError(
      `Cannot read ${what} ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}.`,
    );
  }
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false, reason: `${what} ${path} is not JSON` };
  }
}

/** The receipt `target` names: a saved file, or the receipt of a rental id asked of the service. */
async function receiptOf(ctx: Ctx, target: string): Promise<Read> {
  if (existsSync(target)) return readJson(target, 'the receipt file');
  if (ID.test(target)) return { ok: true, value: await ctx.client().getReceipt(target) };
  throw new UsageError(`${target} is neither a file nor a rental id.`);
}

/** What a valid receipt says, in one line. */
function validLine(check: Extract<ReceiptCheck, { valid: true }>): string {
  const r = check.receipt;
  return (
    `Valid: teardown receipt of rental ${r.rentalId}: ${r.providerId} instance ${r.instanceId} verified destroyed at ${r.endedAt} ` +
    `(provider: ${r.provider.state}${r.provider.httpStatus ? ` ${r.provider.httpStatus}` : ''}, ssh: ${r.ssh.outcome}), ` +
    `charged ${formatCents(r.charged.totalMinor)} ${r.charged.currency}; signed by ${check.key.kid} of ${r.issuer}${check.key.retiredAt ? ' (a key retired since)' : ''}.\n`
  );
}

export function receiptCommands(program: Command, ctx: Ctx): void {
  const receipt = program
    .command('receipt')
    .description(
      "Teardown receipts: the service's signed record that a rental's machine was verifiably destroyed, and what it was charged",
    );

  receipt
    .command('get <id>')
    .description(
      'Print the teardown receipt of a rental (rental or deployment id) as JSON, to save: gpr receipt get <id> > receipt.json',
    )
    .action(async (id: string) => {
      const signed = await ctx.client().getReceipt(id);
      // Always JSON: the receipt is a document to keep and show, byte for byte what the service signed.
      process.stdout.write(`${JSON.stringify(signed, null, 2)}\n`);
    });

  receipt
    .command('verify <file|id>')
    .description(
      `Check a teardown receipt's signature offline: a saved file (gpr receipt get), or a rental id (fetched with your token). ` +
        `Exit 0 when valid, ${EXIT.RECEIPT_INVALID} with one line saying why when not`,
    )
    .option(
      '--keys <file>',
      `the service's receipt keys, saved from ${RECEIPT_KEYS_PATH} (fully offline); without it they are fetched from the service`,
    )
    .action(async (target: string, o: { keys?: string }) => {
      const doc = await receiptOf(ctx, target);
      const keys: Read = o.keys
        ? readJson(o.keys, '--keys')
        : { ok: true, value: await ctx.publicClient().receiptKeys() };
      const check: ReceiptCheck = !doc.ok
        ? { valid: false, problem: 'malformed', reason: doc.reason }
        : !keys.ok
          ? { valid: false, problem: 'malformed', reason: keys.reason }
          : verifyReceipt(doc.value, keys.value);
      if (check.valid) {
        ctx.out({ valid: true, keyId: check.key.kid, receipt: check.receipt }, () => validLine(check));
        return;
      }
      if (ctx.json) process.stdout.write(`${JSON.stringify(check)}\n`);
      else process.stderr.write(`Invalid: ${check.reason}\n`);
      process.exitCode = EXIT.RECEIPT_INVALID;
    });
}
