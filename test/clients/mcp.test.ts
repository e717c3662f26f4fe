import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client, type ClientOptions } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { serverInstructions } from '../../clients/mcp/src/instructions.js';
import { GprClient } from '../../clients/sdk/src/index.js';
import { sshExec } from '../../src/providers/ssh-probe.js';
import { buildClients, GPR_MCP_BIN } from './helpers/build.js';
import { filesUnder, GOOD_RENTAL_ID, HostileService } from './helpers/hostile-service.js';
import { payTopup, startService, TEST_GPU, type RunningService } from './helpers/service.js';

type ToolResult = {
  isError?: boolean;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- each tool's output is read field by field against its own schema
  structuredContent?: any;
  content: { type: string; text?: string }[];
};

const EXPECTED_ANNOTATIONS: Record<
  string,
  { readOnlyHint: boolean; destructiveHint: boolean; idempotentHint: boolean }
> = {
  list_gpus: { readOnlyHint: true, destructiveHint: false, idempotentHint: true },
  list_offers: { readOnlyHint: true, destructiveHint: false, idempotentHint: true },
  get_account: { readOnlyHint: true, destructiveHint: false, idempotentHint: true },
  signup: { readOnlyHint: false, destructiveHint: false, idempotentHint: false },
  create_topup_link: { readOnlyHint: false, destructiveHint: false, idempotentHint: false },
  create_rental: { readOnlyHint: false, destructiveHint: false, idempotentHint: false },
  get_rental: { readOnlyHint: true, destructiveHint: false, idempotentHint: true },
  list_rentals: { readOnlyHint: true, destructiveHint: false, idempotentHint: true },
  list_events: { readOnlyHint: true, destructiveHint: false, idempotentHint: true },
  reveal_ssh_credentials: { readOnlyHint: false, destructiveHint: false, idempotentHint: true },
  terminate_deployment: { readOnlyHint: false, destructiveHint: true, idempotentHint: true },
};

/** How a client opens: the 2026-07-28 protocol (negotiated with server/discover) or the 2025 initialize handshake. */
type Era = 'modern' | 'legacy';

/** What a URL elicitation showed the human. */
type Elicited = { mode?: string; url?: string; message?: string };

/** gpr-mcp over stdio, driven by the official MCP client (v2). */
describe('gpr-mcp tool server (stdio, official MCP client)', function () {
  this.timeout(120_000);
  let service: RunningService;
  let token: string;
  const clients: { client: Client; stderr: () => string }[] = [];
  const seen: string[] = [];

  before(async () => {
    buildClients();
    service = await startService();
    token = (await new GprClient({ baseUrl: service.baseUrl }).signup()).token;
  });
  after(async () => {
    for (const c of clients) await c.client.close();
    await service?.stop();
    // Nothing the server printed or returned carried the token.
    for (const text of [...seen, ...clients.map((c) => c.stderr())])
      assert.ok(!text.includes(token), 'the token leaked');
  });

  /**
   * A gpr-mcp process and a client of it. `era` picks the opening (modern by default); `onElicit`
   * makes a client that declared URL elicitation, answering each with what it returns.
   */
  async function connect(
    env: Record<string, string> = {},
    opts: { era?: Era; onElicit?: (p: Elicited) => Promise<'accept' | 'decline'> } = {},
  ) {
    const xdg = env.XDG_CONFIG_HOME ?? mkdtempSync(join(tmpdir(), 'gpr-mcp-'));
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [GPR_MCP_BIN],
      env: {
        PATH: process.env.PATH ?? '',
        XDG_CONFIG_HOME: xdg,
        GPR_BASE_URL: service.baseUrl,
        GPR_TOKEN: token,
        ...env,
      },
      stderr: 'pipe',
    });
    let stderr = '';
    transport.stderr?.on('data', (d) => (stderr += d));
    const options: ClientOptions = {
      ...((opts.era ?? 'modern') === 'modern' ? { versionNegotiation: { mode: 'auto' } } : {}),
      ...(opts.onElicit ? { capabilities: { elicitation: { url: {} } } } : {}),
    };
    const client = new Client({ name: 'gpr-mcp-test', version: '1.0.0' }, options);
    const onElicit = opts.onElicit;
    if (onElicit)
      client.setRequestHandler('elicitation/create', async (req) => ({
        action: await onElicit(req.params as Elicited),
      }));
    await client.connect(transport);
    assert.equal(client.getProtocolEra(), opts.era ?? 'modern');
    clients.push({ client, stderr: () => stderr });
    const call = async (name: string, args: Record<string, unknown> = {}): Promise<ToolResult> => {
      const res = (await client.callTool({ name, arguments: args })) as ToolResult;
      seen.push(JSON.stringify(res));
      return res;
    };
    return { client, call, xdg };
  }

  it('lists the eleven tools with titles, input and output schemas and honest annotations; instructions speak of cents', async () => {
    const { client } = await connect();
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), Object.keys(EXPECTED_ANNOTATIONS).sort());
    for (const t of tools) {
      assert.ok(t.title, `${t.name} has a title`);
      assert.equal(t.inputSchema.type, 'object', t.name);
      assert.equal(t.outputSchema?.type, 'object', `${t.name} has an output schema`);
      const a = t.annotations!;
      const { readOnlyHint, destructiveHint, idempotentHint } = a;
      assert.deepEqual({ readOnlyHint, destructiveHint, idempotentHint }, EXPECTED_ANNOTATIONS[t.name], t.name);
      assert.equal(a.openWorldHint, true, t.name);
    }
    const create = tools.find((t) => t.name === 'create_rental')!;
    assert.ok((create.inputSchema.properties as Record<string, unknown>).budgetMinor, 'a budget cap can be given');
    assert.ok(
      !(create.inputSchema.required as string[] | undefined)?.includes('budgetMinor'),
      'and is optional, as in the API',
    );
    const named = (tool: string) => Object.keys(tools.find((t) => t.name === tool)!.inputSchema.properties as object);
    assert.deepEqual(
      named('get_rental').sort(),
      ['rentalId', 'waitFor', 'waitSeconds'],
      'named as the HTTP fields are',
    );
    for (const tool of ['reveal_ssh_credentials', 'terminate_deployment'])
      assert.ok(named(tool).includes('rentalId') && named(tool).includes('deploymentId'), tool);
    assert.ok(!(create.inputSchema.required as string[] | undefined)?.includes('idempotencyKey'));
    const wait = tools.find((t) => t.name === 'get_rental')!.inputSchema.properties as Record<
      string,
      { maximum?: number }
    >;
    assert.equal(wait.waitSeconds.maximum, 120, 'the wait is bounded');
    const instructions = client.getInstructions() ?? '';
    assert.match(instructions, /cents/);
    assert.match(instructions, /create_rental/);
    assert.match(instructions, /get_rental/);
    assert.match(instructions, /terminate_deployment/);
    assert.match(instructions, /GPR_MCP_ALLOW_SPEND=1/);
    assert.match(instructions, /GPR_MCP_ALLOW_SECRETS=1/);
    assert.equal(instructions, serverInstructions('stdio'), "a stdio server's own instructions");
    const reveal = tools.find((t) => t.name === 'reveal_ssh_credentials')!;
    assert.match(reveal.description!, /keyFile/);
    assert.match(reveal.description!, /GPR_MCP_ALLOW_SPEND=1/);
    assert.match(reveal.description!, /`manage` scope/);
    assert.ok(
      (reveal.inputSchema.properties as Record<string, unknown>).includePrivateKey,
      'the key is asked for explicitly',
    );
    assert.match(
      tools.find((t) => t.name === 'terminate_deployment')!.description!,
      /GPR_MCP_ALLOW_SPEND=1.*gpr terminate/,
    );
  });

  it('serves the 2025 initialize handshake and the 2026-07-28 protocol alike', async () => {
    const modern = await connect();
    const legacy = await connect({}, { era: 'legacy' });
    assert.equal(modern.client.getNegotiatedProtocolVersion(), '2026-07-28');
    assert.match(legacy.client.getNegotiatedProtocolVersion() ?? '', /^2025-/);
    assert.deepEqual((await legacy.client.listTools()).tools, (await modern.client.listTools()).tools);
    assert.equal(legacy.client.getInstructions(), modern.client.getInstructions());
    for (const { call } of [modern, legacy]) {
      const gpus = await call('list_gpus');
      assert.equal(gpus.structuredContent.models.length, 3, JSON.stringify(gpus));
    }
  });

  it('is read-only by default: create_rental and create_topup_link refuse and nothing is rented; secrets in input are refused', async () => {
    const { call } = await connect();
    const gpus = await call('list_gpus');
    assert.ok(!gpus.isError, JSON.stringify(gpus));
    assert.equal(gpus.structuredContent.models.length, 3);
    const refused = await call('create_rental', {
      gpuModel: TEST_GPU,
      gpuCount: 1,
      maxHourlyPriceMinor: 300,
      budgetMinor: 500,
    });
    assert.equal(refused.isError, true);
    assert.match(refused.content[0].text!, /GPR_MCP_ALLOW_SPEND=1/);
    assert.equal((await call('create_topup_link', { amountMinor: 500 })).isError, true);
    const terminate = await call('terminate_deployment', { rentalId: GOOD_RENTAL_ID });
    assert.equal(terminate.isError, true);
    assert.match(
      terminate.content[0].text!,
      /^REFUSED: terminate_deployment destroys a machine .*`gpr terminate <rentalId> --wait`.*GPR_MCP_ALLOW_SPEND=1/,
    );
    const reveal = await call('reveal_ssh_credentials', { rentalId: GOOD_RENTAL_ID });
    assert.equal(reveal.isError, true);
    assert.match(
      reveal.content[0].text!,
      /^REFUSED: reveal_ssh_credentials opens SSH access .*`gpr ssh <rentalId>`.*GPR_MCP_ALLOW_SPEND=1/,
    );
    assert.deepEqual(await new GprClient({ baseUrl: service.baseUrl, token }).listDeployments(), []);

    const key = await call('get_rental', {
      rentalId: '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----',
    });
    assert.equal(key.isError, true);
    assert.match(key.content[0].text!, /private key or an API token/);
    const tok = await call('get_rental', { rentalId: token });
    assert.equal(tok.isError, true);
    assert.match(tok.content[0].text!, /private key or an API token/);
  });

  it('signup makes a fresh server usable without spending: the key is stored (0600) and used, never shown; a second signup is refused', async () => {
    const { call } = await connect({ GPR_TOKEN: '' });
    const before = await call('get_account');
    assert.equal(before.isError, true);
    assert.match(before.content[0].text!, /^UNAUTHENTICATED/);
    const res = await call('signup', { name: 'mcp-signup-test', maxPerRentalMinor: 1000 });
    assert.equal(res.isError, undefined, JSON.stringify(res));
    assert.equal(res.structuredContent.account.balance.creditsMinor, 0);
    assert.equal(res.structuredContent.account.key.maxPerRentalMinor, 1000);
    assert.match(res.structuredContent.next, /create_topup_link/);
    const stored = JSON.parse(readFileSync(res.structuredContent.configPath, 'utf8')) as {
      token: string;
      baseUrl: string;
    };
    assert.equal(statSync(res.structuredContent.configPath).mode & 0o777, 0o600);
    assert.equal(stored.baseUrl, service.baseUrl);
    assert.ok(!JSON.stringify(res).includes(stored.token), 'the new token is not in the result');
    const after = await call('get_account');
    assert.equal(after.isError, undefined, 'later calls use the new key');
    assert.equal(after.structuredContent.account.key.prefix, res.structuredContent.account.key.prefix);
    const again = await call('signup', {});
    assert.equal(again.isError, true);
    assert.match(
      again.content[0].text!,
      /^REFUSED: this server already has an API key; a signup would make a second, empty account/,
    );
    assert.ok(!seen.some((t) => t.includes(stored.token)), 'no result carried the new token');
  });

  it('turns a 429 into "wait N s"', async () => {
    const limiter: Server = createServer((req, res) => {
      res.writeHead(429, { 'Content-Type': 'application/json', 'Retry-After': '42' });
      res.end(
        JSON.stringify({
          error: { code: 'RATE_LIMITED', message: 'Too many requests; try again in 42 s.', requestId: 'req_limited' },
        }),
      );
    });
    await new Promise<void>((r) => limiter.listen(0, '127.0.0.1', r));
    try {
      const { call } = await connect({
        GPR_BASE_URL: `http://127.0.0.1:${(limiter.address() as { port: number }).port}`,
        GPR_RETRIES: '0',
      });
      const res = await call('list_offers');
      assert.equal(res.isError, true);
      assert.match(res.content[0].text!, /^RATE_LIMITED: wait 42 s before calling again/);
    } finally {
      limiter.close();
    }
  });

  it('refuses to reveal from a hostile service: an ssh option as user or a path as deployment id writes nothing', async () => {
    const hostile = new HostileService();
    await hostile.start();
    try {
      const xdg = mkdtempSync(join(tmpdir(), 'gpr-mcp-hostile-'));
      const { call } = await connect({
        GPR_BASE_URL: hostile.baseUrl,
        GPR_MCP_ALLOW_SPEND: '1',
        GPR_MCP_ALLOW_SECRETS: '1',
        GPR_RETRIES: '0',
        XDG_CONFIG_HOME: xdg,
      });
      hostile.answers.credentials.user = '-oProxyCommand=touch /tmp/pwned';
      const user = await call('reveal_ssh_credentials', { rentalId: GOOD_RENTAL_ID });
      assert.equal(user.isError, true);
      assert.match(user.content[0].text!, /^UNSAFE_SERVICE_VALUE: The service returned user "-oProxyCommand=/);
      assert.doesNotMatch(JSON.stringify(user), /PRIVATE KEY/);
      hostile.answers.credentials.user = 'root';
      hostile.answers.rental.deploymentId = '../../x';
      hostile.answers.credentials.deploymentId = '../../x';
      const path = await call('reveal_ssh_credentials', { rentalId: GOOD_RENTAL_ID, includePrivateKey: true });
      assert.equal(path.isError, true);
      assert.match(path.content[0].text!, /UNSAFE_SERVICE_VALUE: The service returned deploymentId "\.\.\/\.\.\/x"/);
      assert.deepEqual(filesUnder(xdg), [], 'nothing written');
    } finally {
      await hostile.stop();
    }
  });

  describe('with spending allowed', () => {
    let call: Awaited<ReturnType<typeof connect>>['call'];
    let xdg: string;
    let rentalId: string;
    before(async () => {
      ({ call, xdg } = await connect({ GPR_MCP_ALLOW_SPEND: '1' }));
    });

    it('runs the rental flow through tool calls: account, top-up link, rent, wait ACTIVE, reveal, ssh, terminate', async () => {
      const account = await call('get_account');
      assert.equal(account.structuredContent.account.balance.creditsMinor, 0);
      const topup = await call('create_topup_link', { amountMinor: 2000 });
      assert.ok(!topup.isError, JSON.stringify(topup));
      await payTopup(topup.structuredContent.topup.paymentUrl);
      assert.equal((await call('get_account')).structuredContent.account.balance.creditsMinor, 2000);

      const offers = await call('list_offers', { gpu: 'H100', maxPricePerHourMinor: 300 });
      assert.deepEqual(
        offers.structuredContent.offers.map((o: { pricePerHourMinor: number }) => o.pricePerHourMinor),
        [249, 299],
      );

      const created = await call('create_rental', {
        gpuModel: TEST_GPU,
        gpuCount: 1,
        maxHourlyPriceMinor: 300,
        budgetMinor: 500,
      });
      assert.ok(!created.isError, JSON.stringify(created));
      const { rental, idempotencyKey } = created.structuredContent;
      assert.match(idempotencyKey, /^[0-9a-f-]{36}$/, 'generated and returned');
      rentalId = rental.rentalId;
      const replay = await call('create_rental', {
        gpuModel: TEST_GPU,
        gpuCount: 1,
        maxHourlyPriceMinor: 300,
        budgetMinor: 500,
        idempotencyKey,
      });
      assert.equal(replay.structuredContent.rental.rentalId, rentalId, 'the same key returns the same rental');

      const active = await call('get_rental', { rentalId, waitFor: ['ACTIVE', 'FAILED'], waitSeconds: 60 });
      assert.equal(active.structuredContent.rental.status, 'ACTIVE', JSON.stringify(active));
      assert.equal(active.structuredContent.reachedWaitFor, true);

      // A read-only server next to it can neither destroy this machine nor open access to it.
      const readOnly = await connect();
      const refusedEnd = await readOnly.call('terminate_deployment', { rentalId: rentalId });
      assert.equal(refusedEnd.isError, true);
      assert.match(refusedEnd.content[0].text!, /GPR_MCP_ALLOW_SPEND=1/);
      const refusedKey = await readOnly.call('reveal_ssh_credentials', { rentalId: rentalId, includePrivateKey: true });
      assert.equal(refusedKey.isError, true);
      assert.doesNotMatch(JSON.stringify(refusedKey), /PRIVATE KEY/);
      assert.deepEqual(filesUnder(readOnly.xdg), [], 'no key file either');
      assert.equal(
        (await new GprClient({ baseUrl: service.baseUrl, token }).getRental(rentalId)).status,
        'ACTIVE',
        'still running',
      );

      // The key goes to a 0600 file; the model gets its path and a command, not the key.
      const creds = await call('reveal_ssh_credentials', { rentalId: rentalId });
      assert.ok(!creds.isError, JSON.stringify(creds));
      assert.doesNotMatch(JSON.stringify(creds), /PRIVATE KEY/);
      const c = creds.structuredContent.credentials;
      assert.equal(c.privateKey, undefined);
      assert.equal(c.keyFile, join(xdg, 'gpr', 'keys', `${rental.deploymentId}.key`));
      assert.equal(statSync(c.keyFile).mode & 0o777, 0o600);
      assert.match(readFileSync(c.keyFile, 'utf8'), /PRIVATE KEY/);
      assert.match(c.sshCommand, new RegExp(` -- ${c.user}@${c.host.replaceAll('.', '\\.')}$`));
      const smi = await promisify(execFile)('sh', ['-c', `${c.sshCommand} nvidia-smi`], { timeout: 30_000 });
      assert.match(smi.stdout, /H100/);

      // Asking for the key itself is refused unless the server was started with GPR_MCP_ALLOW_SECRETS=1.
      const asked = await call('reveal_ssh_credentials', { rentalId: rentalId, includePrivateKey: true });
      assert.equal(asked.isError, true);
      assert.match(
        asked.content[0].text!,
        /^REFUSED: includePrivateKey needs a server started with GPR_MCP_ALLOW_SECRETS=1/,
      );
      assert.doesNotMatch(JSON.stringify(asked), /PRIVATE KEY/);
      const secrets = await connect({ GPR_MCP_ALLOW_SPEND: '1', GPR_MCP_ALLOW_SECRETS: '1' });
      const withKey = await secrets.call('reveal_ssh_credentials', { rentalId: rentalId, includePrivateKey: true });
      assert.ok(!withKey.isError, JSON.stringify(withKey));
      const k = withKey.structuredContent.credentials;
      assert.equal(k.privateKey, readFileSync(k.keyFile, 'utf8'));
      const viaKey = await sshExec(
        { host: k.host, port: k.port, user: k.user, privateKey: k.privateKey },
        'nvidia-smi',
      );
      assert.equal(viaKey.code, 0);
      const withoutAsking = await secrets.call('reveal_ssh_credentials', { rentalId: rentalId });
      assert.doesNotMatch(
        JSON.stringify(withoutAsking),
        /PRIVATE KEY/,
        'the switch alone does not put the key in results',
      );

      const ended = await call('terminate_deployment', { deploymentId: rental.deploymentId, waitSeconds: 60 });
      assert.equal(ended.structuredContent.accepted, true);
      assert.equal(ended.structuredContent.rental.status, 'TERMINATED');
      assert.ok(ended.structuredContent.rental.endedAt);
      assert.equal(ended.structuredContent.status, 'TERMINATING', 'the status the request left it in');
      assert.match(
        ended.structuredContent.next,
        /^Finished: the machine is destroyed/,
        "the next step in the tools' own words",
      );
      assert.match(ended.structuredContent.message, /^Termination requested/);

      // A repeat says it has already finished; a reveal now is refused with the status, not "wrong id".
      const again = await call('terminate_deployment', { rentalId: rentalId });
      assert.equal(again.structuredContent.status, 'TERMINATED');
      assert.match(again.structuredContent.message, /^Already TERMINATED/);
      const late = await call('reveal_ssh_credentials', { rentalId: rentalId });
      assert.equal(late.isError, true);
      assert.match(
        late.content[0].text!,
        /^DEPLOYMENT_NOT_ACTIVE \(HTTP 409\): .* is TERMINATED\. It will never be ACTIVE again.*Next: Waiting does not help/,
      );
      assert.doesNotMatch(late.content[0].text!, /list_rentals/);
      const unknown = await call('get_rental', { rentalId: '00000000-0000-4000-8000-000000000000' });
      assert.match(
        unknown.content[0].text!,
        /^NOT_FOUND \(HTTP 404\): .*Next: Nothing with this id is visible to this key .*call list_rentals/,
      );
    });

    it('list_rentals shows it (GET /api/v1/rentals)', async () => {
      const page = await call('list_rentals', { limit: 5 });
      assert.ok(!page.isError, JSON.stringify(page));
      assert.equal(page.structuredContent.rentals[0].rentalId, rentalId);
      assert.equal(page.structuredContent.nextCursor, null);
    });

    it('list_events tells its life after an id, and the newest page without one', async () => {
      const page = await call('list_events', { after: '0', limit: 100 });
      assert.ok(!page.isError, JSON.stringify(page));
      const types = page.structuredContent.events
        .filter((e: { data: { rentalId?: string } }) => e.data.rentalId === rentalId)
        .map((e: { type: string }) => e.type);
      assert.deepEqual(types, ['rental.provisioning', 'rental.active', 'rental.terminating', 'rental.terminated']);
      const latest = await call('list_events', { limit: 2 });
      assert.deepEqual(
        latest.structuredContent.events.map((e: { type: string }) => e.type),
        ['rental.terminating', 'rental.terminated'],
        'the newest, oldest first',
      );
      assert.equal(latest.structuredContent.nextAfter, page.structuredContent.nextAfter);
      const after = await call('list_events', { after: latest.structuredContent.nextAfter });
      assert.deepEqual(after.structuredContent.events, [], 'nothing after the newest');
    });
  });

  describe('create_rental refused for credits', () => {
    const RENT = { gpuModel: TEST_GPU, gpuCount: 1, maxHourlyPriceMinor: 300, budgetMinor: 500 };
    /** A new account of its own, with no credits, and a spending server calling with its key. */
    async function unfunded(opts: Parameters<typeof connect>[1] = {}) {
      const own = (await new GprClient({ baseUrl: service.baseUrl }).signup()).token;
      const api = new GprClient({ baseUrl: service.baseUrl, token: own });
      return { api, ...(await connect({ GPR_TOKEN: own, GPR_MCP_ALLOW_SPEND: '1' }, opts)) };
    }
    /** Waits for the rental to run and terminates it, as a model that got one would. */
    async function endRental(call: Awaited<ReturnType<typeof connect>>['call'], id: string) {
      const active = await call('get_rental', { rentalId: id, waitFor: ['ACTIVE', 'FAILED'], waitSeconds: 60 });
      assert.equal(active.structuredContent.rental.status, 'ACTIVE', JSON.stringify(active));
      const ended = await call('terminate_deployment', { rentalId: id, waitSeconds: 60 });
      assert.equal(ended.structuredContent.rental.status, 'TERMINATED', JSON.stringify(ended));
    }
    /** The top-up behind one of the service's checkout links, read by the account's own key. */
    async function topupOf(api: GprClient, url: string) {
      const id = new RegExp(`^${service.baseUrl}/pay/([^/?#]+)$`).exec(url)?.[1];
      assert.ok(id, `${url} is a checkout link of the service`);
      const topup = await api.getTopup(id);
      assert.equal(topup.paymentUrl, url);
      return topup;
    }

    it('asks a client that declared URL elicitation to show the checkout link; once the human has paid, the rental starts in the same call', async () => {
      const elicited: Elicited[] = [];
      const { api, call } = await unfunded({
        onElicit: async (p) => {
          elicited.push(p);
          await payTopup(p.url!);
          return 'accept';
        },
      });
      const res = await call('create_rental', RENT);
      assert.equal(res.isError, undefined, JSON.stringify(res));
      assert.equal(elicited.length, 1);
      assert.equal(elicited[0].mode, 'url');
      assert.match(elicited[0].message!, /Paying \$5\.00 on the service's payment page adds them/);
      const topup = await topupOf(api, elicited[0].url!);
      assert.equal(topup.status, 'PAID');
      assert.equal(topup.amountMinor, 500, 'what the rental lacked, at least one link');
      await endRental(call, res.structuredContent.rental.rentalId);
    });

    it('a 2025-era client that declared URL elicitation gets it too; a human who declines leaves the link and the key to retry with, and nothing rented', async () => {
      const elicited: Elicited[] = [];
      const { api, call } = await unfunded({
        era: 'legacy',
        onElicit: async (p) => {
          elicited.push(p);
          return 'decline';
        },
      });
      const res = await call('create_rental', RENT);
      assert.equal(res.isError, true);
      assert.equal(elicited.length, 1);
      assert.equal(elicited[0].mode, 'url');
      assert.equal(res.structuredContent.topupUrl, elicited[0].url, 'the link shown is the one in the result');
      assert.equal((await topupOf(api, elicited[0].url!)).status, 'OPEN');
      assert.match(
        res.content[0].text!,
        /^INSUFFICIENT_CREDITS \(HTTP 402\): .*The human was shown this link and declined it/,
      );
      assert.deepEqual(await api.listDeployments(), []);
    });

    it('gives any other client the checkout link in the result; paid, the same idempotencyKey rents', async () => {
      const { api, call } = await unfunded();
      const res = await call('create_rental', RENT);
      assert.equal(res.isError, true);
      const { topupUrl, next, idempotencyKey, code } = res.structuredContent;
      assert.equal(code, 'INSUFFICIENT_CREDITS');
      assert.equal((await topupOf(api, topupUrl)).amountMinor, 500);
      assert.ok(res.content[0].text!.includes(topupUrl), 'in the text for hosts that show text only');
      assert.match(next, new RegExp(`call create_rental again with idempotencyKey ${idempotencyKey}`));
      assert.deepEqual(await api.listDeployments(), []);
      await payTopup(topupUrl);
      const paid = await call('create_rental', { ...RENT, idempotencyKey });
      assert.equal(paid.isError, undefined, JSON.stringify(paid));
      assert.equal(paid.structuredContent.idempotencyKey, idempotencyKey);
      await endRental(call, paid.structuredContent.rental.rentalId);
    });
  });
});
