import { Command, CommanderError } from 'commander';
import { accountCommands } from './commands/account.js';
import { eventCommands } from './commands/events.js';
import { inventoryCommands } from './commands/inventory.js';
import { receiptCommands } from './commands/receipts.js';
import { rentalCommands } from './commands/rentals.js';
import { credentialCommands } from './commands/ssh.js';
import { Ctx, FALLBACK_BASE_URL_TEXT, VERSION } from './context.js';
import { EXIT, EXIT_HELP, reportError } from './output.js';

const program = new Command('gpr');
const ctx = new Ctx(program);
program
  .description('Rent GPU machines from the command line. Money is typed in dollars and sent as cents.')
  .version(VERSION, '-V, --version')
  .option('--json', 'machine-readable output on stdout (errors too, as {"error":{...}})')
  .option('--base-url <url>', `service address (default: GPR_BASE_URL, the config file, ${FALLBACK_BASE_URL_TEXT})`)
  .showHelpAfterError()
  .addHelpText(
    'after',
    `\nEnvironment: GPR_TOKEN (API token), GPR_BASE_URL (service address), GPR_RETRIES (retries of failed requests, default 3),\nXDG_CONFIG_HOME (config at $XDG_CONFIG_HOME/gpr/config.json, default ~/.config).\n\n${EXIT_HELP}\n`,
  )
  .exitOverride();

accountCommands(program, ctx);
inventoryCommands(program, ctx);
rentalCommands(program, ctx);
credentialCommands(program, ctx);
eventCommands(program, ctx);
receiptCommands(program, ctx);
for (const c of program.commands) c.exitOverride().showHelpAfterError();

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    // Help and version end "with an error" in commander's override mode; they are successes.
    process.exitCode = err.exitCode === 0 ? EXIT.OK : EXIT.USAGE;
  } else {
    process.exitCode = reportError(err, ctx.json);
  }
}
