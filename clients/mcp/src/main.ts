import {
  effectiveSettings,
  GprClient,
  PACKAGED_SERVICE_FILE,
  packagedBaseUrl,
  readStoredConfig,
  writeStoredConfig,
} from '@gpu-rental/sdk';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { registerTools, type ToolDeps } from './tools.js';

declare const __CLIENT_VERSION__: string;
const VERSION = typeof __CLIENT_VERSION__ === 'string' ? __CLIENT_VERSION__ : '0.0.0-dev';

if (process.argv.includes('--version') || process.argv.includes('-V')) {
  process.stdout.write(`${VERSION}\n`);
  process.exit(0);
}

const INSTRUCTIONS = `GPU rental tools. All money is integer USD cents (500 = $5.00); prices are per hour for the whole machine.
Flow: 0) Without a key (get_account answers UNAUTHENTICATED), signup once: it spends nothing and the server keeps the key. 1) list_gpus / list_offers to choose. 2) get_account: check balance.creditsMinor, the key's limits and billing.budgetRequired.
3) If credits are short, create_topup_link and give the link to a human; only their payment adds credits.
4) create_rental with offerId, or gpuModel + gpuCount + maxHourlyPriceMinor; budgetMinor (the most this rental may spend) when billing.budgetRequired is true, optional otherwise. Keep the returned rentalId and idempotencyKey; retry a failed call with the same idempotencyKey, never a new one.
   Optional: machine { image, env, startupScript, ports, diskGb } (what runs on it; list_offers shows each offer's capabilities), terminateAfterSeconds (a lease from ACTIVE), waitForCapacitySeconds (gpuModel only: wait for an eligible offer). env values and the script are secrets: never returned.
5) get_rental with rentalId and waitFor ["ACTIVE", "FAILED"] (the service answers within a second of the change, so no polling between calls; repeat until status is ACTIVE; phase says where it stands meanwhile; FAILED carries failureReason and the credit reversal). ACTIVE means SSH gets in, the GPUs are there and the startup script has started; endpoints then give each port's URL.
6) reveal_ssh_credentials saves the private key to a 0600 file and returns keyFile and sshCommand: run sshCommand in a shell, with a remote command appended. 7) terminate_deployment as soon as the work is done: charges run until then.
list_events with after (its last nextAfter) tells what happened since: rentals starting, failing, ending, credits running low.
A RATE_LIMITED error says how many seconds to wait. create_rental, create_topup_link, terminate_deployment and reveal_ssh_credentials run only when the server was started with GPR_MCP_ALLOW_SPEND=1; when one is refused, tell the human what to run with the gpr command line (the refusal says what) instead of retrying.
The private key is returned as text only with includePrivateKey on a server started with GPR_MCP_ALLOW_SECRETS=1; prefer keyFile. Never pass private keys or tokens as tool input.`;

// A copy installed from a service carries its address beside dist/, and calls it by default.
const settings = effectiveSettings({}, packagedBaseUrl(new URL(`../${PACKAGED_SERVICE_FILE}`, import.meta.url)));
const log = (line: string) => process.stderr.write(`gpr-mcp: ${line}\n`);
const server = new McpServer(
  { name: 'gpu-rental', title: 'GPU rental', version: VERSION },
  { instructions: INSTRUCTIONS },
);
let client: GprClient | undefined;
const allowSpend = process.env.GPR_MCP_ALLOW_SPEND === '1';
const allowSecrets = process.env.GPR_MCP_ALLOW_SECRETS === '1';
const deps: ToolDeps = {
  client: () =>
    (client ??= new GprClient({
      baseUrl: settings.baseUrl,
      token: deps.token,
      retries: settings.retries,
      userAgent: `gpr-mcp/${VERSION}`,
    })),
  allowSpend,
  allowSecrets,
  token: settings.token,
  adoptToken(token) {
    deps.token = token;
    client = undefined;
    return writeStoredConfig({ ...readStoredConfig(), baseUrl: settings.baseUrl, token });
  },
  log,
};
registerTools(server, deps);
await server.connect(new StdioServerTransport());
log(
  `serving ${settings.baseUrl} (${settings.token ? 'with a token' : 'no token: public tools only'}; ` +
    `spending, terminating and SSH access ${allowSpend ? 'allowed' : 'refused'}; private keys in results ${allowSpend && allowSecrets ? 'allowed when asked' : 'refused'})`,
);
