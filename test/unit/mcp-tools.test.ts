import assert from 'node:assert/strict';
import { GprApiError, type GprClient } from '@gpu-rental/sdk';
import { Client, InMemoryTransport, type ClientOptions } from '@modelcontextprotocol/client';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { serverInstructions } from '../../clients/mcp/src/instructions.js';
import { createToolServer, type ToolDeps } from '../../clients/mcp/src/server.js';

type ToolResult = {
  isError?: boolean;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- each tool's output is read field by field against its own schema
  structuredContent?: any;
  content: { type: string; text?: string }[];
};

const RENTAL_ID = '0b7c6d5e-4f3a-4b2c-9d1e-0f9a8b7c6d5e';
const DEPLOYMENT_ID = '5e1d9c8b-7a6f-4e3d-8c2b-1a0f9e8d7c6b';
const PRIVATE_KEY =
  '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n';
const PAYMENT_URL = 'https://pay.example.net/pay/topup_1';
const INTENT = { gpuModel: 'H100 SXM', gpuCount: 1, maxHourlyPriceMinor: 300, budgetMinor: 500 };
const RENTAL = {
  rentalId: RENTAL_ID,
  deploymentId: DEPLOYMENT_ID,
  status: 'PENDING',
  endedAt: null,
  billingModel: 'MAX_SPEND_METERED',
  quote: { hourlyPriceMinor: 299, totalMinor: 0, currency: 'USD' },
};
const SHORT = new GprApiError(
  402,
  'INSUFFICIENT_CREDITS',
  'This rental needs 1234 cents of credits; the account has 100 (50 of them reserved by its running metered rentals). Top up with POST /api/v1/billing/topups (a payment link for a human to pay), then retry.',
  'req_short',
);

/**
 * The service as the tools see it (the methods they call), recording each call: nothing here
 * opens a socket.
 */
class FakeService {
  calls: { method: string; args: unknown[] }[] = [];
  /** What each createRental call does, in turn; the last one repeats. */
  rentals: (() => unknown)[] = [() => RENTAL];
  topupFails?: Error;
  private topups = new Map<string, Record<string, unknown>>();

  client(): GprClient {
    const record =
      (method: string, fn: (...args: never[]) => unknown) =>
      async (...args: unknown[]) => {
        this.calls.push({ method, args });
        return (fn as (...a: unknown[]) => unknown)(...args);
      };
    return {
      signup: record('signup', () => ({ token: 'never' })),
      me: record('me', () => ACCOUNT),
      resolve: record('resolve', () => ({ rentalId: RENTAL_ID, deploymentId: DEPLOYMENT_ID })),
      revealCredentials: record('revealCredentials', () => ({
        deploymentId: DEPLOYMENT_ID,
        host: 'gpu-7.example.com',
        port: 2222,
        user: 'root',
        privateKey: PRIVATE_KEY,
      })),
      createRental: record('createRental', () => {
        const n = this.calls.filter((c) => c.method === 'createRental').length - 1;
        return this.rentals[Math.min(n, this.rentals.length - 1)]();
      }),
      createTopup: record('createTopup', (amountMinor: number) => {
        if (this.topupFails) throw this.topupFails;
        const topup = {
          topupId: `topup_${this.topups.size + 1}`,
          paymentUrl: PAYMENT_URL,
          amountMinor,
          status: 'OPEN',
          expiresAt: '2026-01-15T13:00:00.000Z',
        };
        this.topups.set(topup.topupId, topup);
        return topup;
      }),
      getTopup: record('getTopup', (id: string) => {
        const t = this.topups.get(id);
        if (!t) throw new GprApiError(404, 'NOT_FOUND', 'No such top-up.', null);
        return t;
      }),
    } as unknown as GprClient;
  }

  sent(method: string) {
    return this.calls.filter((c) => c.method === method);
  }
}

const ACCOUNT = {
  user: { id: 'u1' },
  key: {
    prefix: 'gpr_AAAA',
    scopes: ['rent'],
    maxPerRentalMinor: 500,
    remainingBudgetMinor: 500,
    maxConcurrentDeployments: 1,
    activeDeployments: 0,
  },
  balance: { creditsMinor: 0, frozen: false },
  billing: { model: 'ACCOUNT_BALANCE', budgetRequired: false },
};

/** What a remote endpoint gives the tools: no token adoption, no key files. */
function remoteDeps(service: FakeService, over: Partial<ToolDeps> = {}): ToolDeps {
  return { client: () => service.client(), allowSpend: true, allowSecrets: false, log: () => undefined, ...over };
}

/** What the stdio server gives them. */
function stdioDeps(service: FakeService, over: Partial<ToolDeps> = {}): ToolDeps {
  return remoteDeps(service, {
    adoptToken: () => '/tmp/config.json',
    saveKeyFiles: () => ({ keyFile: '/keys/k.key', knownHostsFile: '/keys/k.known_hosts' }),
    ...over,
  });
}

/**
 * A client connected in process to the tool server, served by the stdio entry over an in-memory
 * pair: `legacy` opens with the 2025 initialize handshake, `modern` with 2026-07-28.
 */
async function connect(deps: ToolDeps, era: 'legacy' | 'modern', options: ClientOptions = {}) {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const handle = serveStdio(() => createToolServer(deps, { version: '9.9.9' }), { transport: serverSide });
  const client = new Client(
    { name: 'mcp-tools-test', version: '1.0.0' },
    { ...options, ...(era === 'modern' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {}) },
  );
  await client.connect(clientSide);
  assert.equal(client.getProtocolEra(), era);
  const call = async (name: string, args: Record<string, unknown> = {}) =>
    (await client.callTool({ name, arguments: args })) as ToolResult;
  return { client, call, close: () => Promise.all([client.close(), handle.close()]) };
}

/** A client that can show a human a URL, answering each URL elicitation with `action`. */
function urlClient(action: 'accept' | 'decline', seen: { mode?: string; url?: string; message?: string }[]) {
  return async (deps: ToolDeps, era: 'legacy' | 'modern') => {
    const c = await connect(deps, era, { capabilities: { elicitation: { url: {} } } });
    c.client.setRequestHandler('elicitation/create', async (req) => {
      const p = req.params as { mode?: string; url?: string; message?: string };
      seen.push({ mode: p.mode, url: p.url, message: p.message });
      return { action };
    });
    return c;
  };
}

describe('gpr-mcp tool server (createToolServer, in process)', () => {
  for (const era of ['legacy', 'modern'] as const) {
    it(`serves the eleven tools as gpu-rental on the ${era} era, with the stdio or the remote instructions`, async () => {
      const stdio = await connect(stdioDeps(new FakeService()), era);
      const remote = await connect(remoteDeps(new FakeService()), era);
      try {
        assert.equal((await stdio.client.listTools()).tools.length, 11);
        assert.equal((await remote.client.listTools()).tools.length, 11);
        assert.equal(stdio.client.getServerVersion()?.name, 'gpu-rental');
        assert.equal(stdio.client.getServerVersion()?.title, 'GPU rental');
        assert.equal(stdio.client.getInstructions(), serverInstructions('stdio'));
        assert.equal(remote.client.getInstructions(), serverInstructions('remote'));
      } finally {
        await stdio.close();
        await remote.close();
      }
    });
  }

  it('words the instructions for their transport, sharing every line both give', () => {
    const stdio = serverInstructions('stdio');
    const remote = serverInstructions('remote');
    for (const word of ['GPR_MCP_ALLOW_SPEND=1', 'GPR_MCP_ALLOW_SECRETS=1', 'signup', 'keyFile']) {
      assert.ok(stdio.includes(word), `stdio: ${word}`);
      assert.ok(!remote.includes(word), `remote: ${word}`);
    }
    assert.match(remote, /acts as an agent key its owner approved/);
    assert.match(remote, /within the limits the owner gave the key/);
    assert.match(remote, /credits are added only by a human paying a top-up link/);
    const shared = stdio.split('\n').filter((line) => remote.split('\n').includes(line));
    assert.ok(shared.length >= 5, 'money, top-up, rent, wait and events are said once for both');
  });

  it('signup on a server without adoptToken refuses and sends nothing', async () => {
    const service = new FakeService();
    const { call, close } = await connect(remoteDeps(service), 'modern');
    try {
      const res = await call('signup', { name: 'x' });
      assert.equal(res.isError, true);
      assert.match(
        res.content[0].text!,
        /^REFUSED: this connection already acts as an agent key its owner approved; get_account shows its credits and limits/,
      );
      assert.deepEqual(service.calls, [], 'nothing was sent');
    } finally {
      await close();
    }
  });

  it('reveal_ssh_credentials without saveKeyFiles names a key file the caller saves, and sends the key only when asked on a server allowed to', async () => {
    const service = new FakeService();
    const plain = await connect(remoteDeps(service, { allowSecrets: true }), 'modern');
    const noSecrets = await connect(remoteDeps(service), 'legacy');
    try {
      const res = await plain.call('reveal_ssh_credentials', { rentalId: RENTAL_ID });
      assert.equal(res.isError, undefined, JSON.stringify(res));
      const c = res.structuredContent.credentials;
      assert.deepEqual(
        { deploymentId: c.deploymentId, host: c.host, port: c.port, user: c.user },
        { deploymentId: DEPLOYMENT_ID, host: 'gpu-7.example.com', port: 2222, user: 'root' },
      );
      assert.equal(c.keyFile, `./gpr-${DEPLOYMENT_ID}.key`);
      assert.equal(c.keyFileSaved, false);
      assert.match(
        c.sshCommand,
        new RegExp(`^ssh -i \\./gpr-${DEPLOYMENT_ID}\\.key -p 2222 .* -- root@gpu-7\\.example\\.com$`),
      );
      assert.equal(c.privateKey, undefined);
      assert.doesNotMatch(JSON.stringify(res), /PRIVATE KEY/);
      assert.match(res.structuredContent.next, /again with includePrivateKey: true .* mode 0600/);

      const withKey = await plain.call('reveal_ssh_credentials', {
        deploymentId: DEPLOYMENT_ID,
        includePrivateKey: true,
      });
      assert.equal(withKey.isError, undefined, JSON.stringify(withKey));
      assert.equal(withKey.structuredContent.credentials.privateKey, PRIVATE_KEY);
      assert.match(
        withKey.structuredContent.next,
        new RegExp(`^Save privateKey to \\./gpr-${DEPLOYMENT_ID}\\.key with mode 0600`),
      );

      const refused = await noSecrets.call('reveal_ssh_credentials', { rentalId: RENTAL_ID, includePrivateKey: true });
      assert.equal(refused.isError, true);
      assert.match(refused.content[0].text!, /^REFUSED: this connection does not pass private keys/);
      assert.doesNotMatch(JSON.stringify(refused), /PRIVATE KEY|keyFile/);
      const without = await noSecrets.call('reveal_ssh_credentials', { rentalId: RENTAL_ID });
      assert.match(without.structuredContent.next, /does not pass private keys .*`gpr ssh <rentalId>`/);
    } finally {
      await plain.close();
      await noSecrets.close();
    }
  });

  describe('create_rental refused for credits', () => {
    for (const era of ['legacy', 'modern'] as const) {
      it(`asks a client that declared URL elicitation to show the top-up link (${era}), then rents with the same key once the human went to pay`, async () => {
        const service = new FakeService();
        service.rentals = [
          () => {
            throw SHORT;
          },
          () => RENTAL,
        ];
        const seen: { mode?: string; url?: string; message?: string }[] = [];
        const { call, close } = await urlClient('accept', seen)(stdioDeps(service), era);
        try {
          const res = await call('create_rental', INTENT);
          assert.equal(res.isError, undefined, JSON.stringify(res));
          assert.equal(res.structuredContent.rental.rentalId, RENTAL_ID);
          assert.deepEqual(
            seen.map((s) => [s.mode, s.url]),
            [['url', PAYMENT_URL]],
            'one URL elicitation',
          );
          assert.match(seen[0].message!, /Paying \$12\.00 /);
          // The shortfall, 1234 - (100 - 50) cents, in whole dollars.
          assert.deepEqual(
            service.sent('createTopup').map((c) => c.args[0]),
            [1200],
          );
          const keys = service.sent('createRental').map((c) => c.args[1]);
          assert.equal(keys.length, 2);
          assert.equal(keys[0], keys[1], 'the retry is the same rental');
          assert.equal(res.structuredContent.idempotencyKey, keys[0]);
        } finally {
          await close();
        }
      });
    }

    it('a human who declines gets no rental; the model gets the same link and the key to retry with', async () => {
      const service = new FakeService();
      service.rentals = [
        () => {
          throw SHORT;
        },
      ];
      const seen: { url?: string }[] = [];
      const { call, close } = await urlClient('decline', seen)(stdioDeps(service), 'modern');
      try {
        const res = await call('create_rental', { ...INTENT, idempotencyKey: 'rent-1' });
        assert.equal(res.isError, true);
        assert.equal(res.structuredContent.topupUrl, PAYMENT_URL);
        assert.equal(res.structuredContent.topup.topupId, 'topup_1', 'the link already shown, not a second one');
        assert.equal(service.sent('createTopup').length, 1);
        assert.match(
          res.content[0].text!,
          /^INSUFFICIENT_CREDITS \(HTTP 402\): .*The human was shown this link and declined it/,
        );
        assert.match(res.structuredContent.next, /call create_rental again with idempotencyKey rent-1/);
      } finally {
        await close();
      }
    });

    for (const era of ['legacy', 'modern'] as const) {
      it(`gives any other client (${era}) the link in the result's text and structured content`, async () => {
        const service = new FakeService();
        service.rentals = [
          () => {
            throw SHORT;
          },
        ];
        // Form elicitation only: a card field or an amount is never asked for, so this client gets a link.
        const { client, call, close } = await connect(stdioDeps(service), era, {
          capabilities: { elicitation: { form: {} } },
        });
        client.setRequestHandler('elicitation/create', async () => {
          throw new Error('no elicitation expected');
        });
        try {
          const res = await call('create_rental', INTENT);
          assert.equal(res.isError, true);
          const { topupUrl, next, idempotencyKey, topup } = res.structuredContent;
          assert.equal(topupUrl, PAYMENT_URL);
          assert.equal(topup.amountMinor, 1200);
          assert.ok(res.content[0].text!.includes(PAYMENT_URL));
          assert.match(next, /give https:\/\/pay\.example\.net\/pay\/topup_1 to a human to pay/);
          assert.ok(next.includes(`idempotencyKey ${idempotencyKey}`));
          assert.equal(service.sent('createRental').length, 1);
        } finally {
          await close();
        }
      });
    }

    it("a key without billing asks its owner: by the owner's URL when there is one (elicited), in words otherwise", async () => {
      const service = new FakeService();
      service.rentals = [
        () => {
          throw SHORT;
        },
        () => {
          throw SHORT;
        },
      ];
      service.topupFails = new GprApiError(403, 'FORBIDDEN', 'This key lacks the billing scope.', null);
      const elicited: { mode?: string; url?: string }[] = [];
      const withBot = await connect(
        remoteDeps(service, { ownerTopupUrl: (cents) => `https://t.me/owner_bot?start=topup_${cents}` }),
        'modern',
        { capabilities: { elicitation: { url: {} } } },
      );
      withBot.client.setRequestHandler('elicitation/create', async (req) => {
        elicited.push(req.params as { mode?: string; url?: string });
        return { action: 'decline' as const };
      });
      try {
        const res = await withBot.call('create_rental', INTENT);
        assert.equal(res.isError, true);
        assert.deepEqual(
          elicited.map((e) => [e.mode, e.url]),
          [['url', 'https://t.me/owner_bot?start=topup_1200']],
        );
        assert.match(res.content[0].text!, /give https:\/\/t\.me\/owner_bot\?start=topup_1200 to the owner/);
      } finally {
        await withBot.close();
      }
      service.rentals = [
        () => {
          throw SHORT;
        },
      ];
      const plain = await connect(remoteDeps(service, { ownerTopupUrl: () => null }), 'modern');
      try {
        const res = await plain.call('create_rental', INTENT);
        assert.match(
          res.content[0].text!,
          /^INSUFFICIENT_CREDITS .*This key cannot add credits; the account owner can .*Ask them to add \$12\.00, then call create_rental again with idempotencyKey /,
        );
      } finally {
        await plain.close();
      }
    });

    it('without a link it says to call create_topup_link; a refusal of another kind is left as it was', async () => {
      const service = new FakeService();
      service.rentals = [
        () => {
          throw SHORT;
        },
      ];
      service.topupFails = new GprApiError(503, 'UNAVAILABLE', 'Payments are not reachable.', null);
      const { call, close } = await connect(stdioDeps(service), 'modern', {
        capabilities: { elicitation: { url: {} } },
      });
      try {
        const res = await call('create_rental', INTENT);
        assert.equal(res.isError, true);
        assert.match(
          res.content[0].text!,
          /^INSUFFICIENT_CREDITS .*No top-up link could be made here \(UNAVAILABLE: .*\)\. Call create_topup_link with amountMinor 1200/,
        );
        service.rentals = [
          () => {
            throw new GprApiError(403, 'KEY_LIMIT_EXCEEDED', 'Over the cap.', null);
          },
        ];
        const other = await call('create_rental', INTENT);
        assert.match(other.content[0].text!, /^KEY_LIMIT_EXCEEDED .*Next: Over the key's per-rental cap/);
        assert.equal(service.sent('createTopup').length, 1, 'no link for a refusal credits do not lift');
      } finally {
        await close();
      }
    });
  });
});
