import { dollarsToCents, formatCents, formatDuration, readStoredConfig, writeStoredConfig } from '@gpu-rental/sdk';
import type { Command } from 'commander';
import { type Ctx, timeoutMs } from '../context.js';
import { fields, table, UsageError } from '../output.js';

export function accountCommands(program: Command, ctx: Ctx): void {
  program
    .command('signup')
    .description('Create a new zero-balance account and store its token in the config file (mode 0600)')
    .option('--max-per-rental <usd>', 'per-rental spending cap of the key (default 5.00)')
    .option('--budget-limit <usd>', 'total spending cap of the key (default 500.00)')
    .option('--max-concurrent <n>', 'concurrent rentals the key may run (default 1)')
    .option('--force', 'replace a token already stored')
    .action(async (o: { maxPerRental?: string; budgetLimit?: string; maxConcurrent?: string; force?: boolean }) => {
      const stored = readStoredConfig();
      if (stored.token && !o.force)
        throw new UsageError(
          'A token is already stored; pass --force to replace it with a new account (the old token is then lost).',
        );
      const body: Record<string, number> = {};
      if (o.maxPerRental) body.maxPerRentalMinor = dollarsToCents(o.maxPerRental);
      if (o.budgetLimit) body.budgetLimitMinor = dollarsToCents(o.budgetLimit);
      if (o.maxConcurrent) body.maxConcurrentDeployments = Number(o.maxConcurrent);
      const client = ctx.publicClient();
      const res = await client.signup(body);
      const path = writeStoredConfig({ ...stored, baseUrl: client.baseUrl, token: res.token });
      ctx.out(
        { account: res.account, configPath: path },
        () =>
          `Signed up. Account ${res.account.user.id}, key ${res.account.key.prefix} (${res.account.key.scopes.join(', ')}).\n` +
          `Token saved to ${path}. Balance is $0.00: next, \`gpr topup <usd> --wait\`.\n`,
      );
    });

  program
    .command('setup <code>')
    .description("Exchange an owner's one-time setup code for an agent key and store it")
    .action(async (code: string) => {
      const client = ctx.publicClient();
      const res = await client.exchangeSetupCode(code);
      if (!res.token) throw new UsageError('The service returned no token for this code.');
      const path = writeStoredConfig({ ...readStoredConfig(), baseUrl: client.baseUrl, token: res.token });
      ctx.out(
        { key: res.key, configPath: path },
        () => `Agent key ${res.key.prefix} stored in ${path} (scopes ${res.key.scopes.join(', ')}).\n`,
      );
    });

  program
    .command('whoami')
    .description('Show the account, the key and its limits, and the billing model')
    .action(async () => {
      const me = await ctx.client().me();
      ctx.out(me, () =>
        fields([
          ['account', me.user.id],
          ['key', `${me.key.name} (${me.key.prefix}, ${me.key.kind})`],
          ['scopes', me.key.scopes.join(', ')],
          ['credits', formatCents(me.balance.creditsMinor)],
          ['per-rental cap', formatCents(me.key.maxPerRentalMinor)],
          ['key budget left', formatCents(me.key.remainingBudgetMinor)],
          ['concurrent', `${me.key.activeDeployments} of ${me.key.maxConcurrentDeployments}`],
          [
            'longest rental',
            me.key.maxRentalSeconds == null
              ? 'no limit'
              : `${formatDuration(me.key.maxRentalSeconds)} (every rental's lease is at most this)`,
          ],
          ['billing', me.billing.model],
          ['budget required', me.billing.budgetRequired ? 'yes: pass --budget to gpr rent' : 'no'],
        ]),
      );
    });

  program
    .command('balance')
    .description('Show the credit balance and recent ledger entries')
    .action(async () => {
      const b = await ctx.client().balance();
      ctx.out(
        b,
        () =>
          `Credits: ${formatCents(b.creditsMinor)}${b.frozen ? ' (frozen)' : ''}; key budget left ${formatCents(b.keyRemainingBudgetMinor)}\n` +
          (b.entries.length
            ? table(
                ['when', 'kind', 'amount', 'description'],
                b.entries.map((e) => [e.createdAt, e.kind, formatCents(e.amountMinor), e.description]),
              )
            : ''),
      );
    });

  program
    .command('topup <usd>')
    .description('Create a card payment link for a human to add credits (5.00 to 500.00); --wait until paid')
    .option('--wait', 'wait until the payment is credited')
    .option('--timeout <duration>', 'how long --wait waits (default 1800 s; e.g. 30m)')
    .action(async (usd: string, o: { wait?: boolean; timeout?: string }) => {
      const client = ctx.client();
      const topup = await client.createTopup(dollarsToCents(usd));
      if (!o.wait) {
        ctx.out(
          topup,
          () => `Pay ${formatCents(topup.amountMinor)} here (a human opens it in a browser):\n${topup.paymentUrl}\n`,
        );
        return;
      }
      // Waiting: the link must be visible before the wait ends, so it goes to stderr now.
      process.stderr.write(
        `Pay ${formatCents(topup.amountMinor)} here (a human opens it in a browser): ${topup.paymentUrl}\n`,
      );
      const progress = ctx.progress();
      try {
        const paid = await client.waitForTopup(topup.topupId, {
          timeoutMs: timeoutMs(o.timeout, 1800),
          onProgress: (t) => progress.update(`payment ${t.status}`),
        });
        progress.stop();
        const me = await client.me();
        ctx.out(
          { topup: paid, creditsMinor: me.balance.creditsMinor },
          () => `Paid. Credits now ${formatCents(me.balance.creditsMinor)}.\n`,
        );
      } finally {
        progress.stop();
      }
    });
}
