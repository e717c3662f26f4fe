import {
  effectiveSettings,
  GprClient,
  PACKAGED_SERVICE_FILE,
  packagedBaseUrl,
  readStoredConfig,
  writeSshKeyFiles,
  writeStoredConfig,
} from '@gpu-rental/sdk';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { createToolServer, type ToolDeps } from './server.js';

declare const __CLIENT_VERSION__: string;
const VERSION = typeof __CLIENT_VERSION__ === 'string' ? __CLIENT_VERSION__ : '0.0.0-dev';

if (process.argv.includes('--version') || process.argv.includes('-V')) {
  process.stdout.write(`${VERSION}\n`);
  process.exit(0);
}

// A copy installed from a service carries its address beside dist/, and calls it by default.
const settings = effectiveSettings({}, packagedBaseUrl(new URL(`../${PACKAGED_SERVICE_FILE}`, import.meta.url)));
const log = (line: string) => process.stderr.write(`gpr-mcp: ${line}\n`);
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
  saveKeyFiles: writeSshKeyFiles,
  instructions: 'stdio',
  log,
};
// One server per connection, whichever era the client opens with: the 2025 initialize
// handshake or the 2026-07-28 server/discover (serveStdio also builds one to answer that probe).
serveStdio(() => createToolServer(deps, { version: VERSION }), {
  onerror: (err) => log(`protocol error: ${err.message}`),
});
log(
  `serving ${settings.baseUrl} (${settings.token ? 'with a token' : 'no token: public tools only'}; ` +
    `spending, terminating and SSH access ${allowSpend ? 'allowed' : 'refused'}; private keys in results ${allowSpend && allowSecrets ? 'allowed when asked' : 'refused'})`,
);
