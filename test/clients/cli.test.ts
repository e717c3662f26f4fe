import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildClients, GPR_BIN, run, type Run } from './helpers/build.js';
import { closedPortUrl, payTopup, startService, TEST_GPU, type RunningService } from './helpers/service.js';
import { watchdog } from '../helpers/wait.js';

const REQUEST_ID = /^req_[0-9a-f-]{36}$/;

/** `gpr` as an agent runs it: the built binary, a config home of its own, no terminal. */
describe('gpr command line (built binary against the running service)', function () {
  this.timeout(120_000);
  let service: RunningService;

  before(async () => {
    buildClients();
    service = await startService({ AGENT_SETUP_RATE_PER_MINUTE: '2' });
  });
  after(async () => {
    await service?.stop();
  });

  const home = () => mkdtempSync(join(tmpdir(), 'gpr-home-'));
  const gpr = (xdg: string, args: string[], env: Record<string, string> = {}, onStderr?: (s: string) => void) =>
    run(GPR_BIN, args, { HOME: xdg, XDG_CONFIG_HOME: xdg, GPR_BASE_URL: service.baseUrl, ...env }, onStderr);
  /** `gpr --json events --follow --after 0` until a line satisfies `done`, then interrupted as a person would. */
  const follow = (xdg: string, done: (line: string) => boolean) =>
    new Promise<string[]>((resolve, reject) => {
      const child = spawn(process.execPath, [GPR_BIN, '--json', 'events', '--follow', '--after', '0'], {
        env: { PATH: process.env.PATH ?? '', HOME: xdg, XDG_CONFIG_HOME: xdg, GPR_BASE_URL: service.baseUrl },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const lines: string[] = [];
      let buffer = '';
      const cancelWatchdog = watchdog(30_000, () => child.kill('SIGKILL'));
      child.stdout.on('data', (d) => {
        buffer += d;
        const parts = buffer.split('\n');
        buffer = parts.pop()!;
        lines.push(...parts);
        if (parts.some(done)) child.kill('SIGINT');
      });
      child.on('error', reject);
      child.on('close', (code) => {
        cancelWatchdog();
        if (!lines.some(done)) reject(new Error(`gpr events --follow ended (${code}) with: ${lines.join('\n')}`));
        else resolve(lines);
      });
    });
  const json = (r: Run) => {
    assert.equal(r.code, 0, `exit ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
    return JSON.parse(r.stdout);
  };

  it('--json: signup, top-up paid through the checkout page with --wait, rent --gpu --wait, ssh -- nvidia-smi, terminate --wait', async () => {
    const xdg = home();
    const signup = json(await gpr(xdg, ['--json', 'signup']));
    const configPath = join(xdg, 'gpr', 'config.json');
    assert.equal(signup.configPath, configPath);
    assert.equal(statSync(configPath).mode & 0o777, 0o600);
    const stored = JSON.parse(readFileSync(configPath, 'utf8'));
    assert.match(stored.token, /^gpr_[A-Za-z0-9]{8}\./);
    assert.equal(stored.baseUrl, service.baseUrl);
    assert.ok(!JSON.stringify(signup).includes(stored.token), 'the token is stored, not printed');
    assert.deepEqual(signup.account.key.scopes.sort(), ['billing', 'manage', 'read', 'rent']);

    // The payment link shows up on stderr while --wait polls; the "human" pays it.
    let paying: Promise<void> | undefined;
    const topup = json(
      await gpr(xdg, ['--json', 'topup', '20', '--wait', '--timeout', '60'], {}, (chunk) => {
        const link = /(http:\/\/\S+\/pay\/[0-9a-f-]{36})/.exec(chunk);
        if (link && !paying) paying = payTopup(link[1]);
      }),
    );
    await paying;
    assert.equal(topup.topup.status, 'PAID');
    assert.equal(topup.topup.amountMinor, 2000, 'dollars on the command line, cents on the wire');
    assert.equal(topup.creditsMinor, 2000);

    const me = json(await gpr(xdg, ['--json', 'whoami']));
    assert.equal(me.balance.creditsMinor, 2000);
    assert.match((await gpr(xdg, ['whoami'])).stdout, /^longest rental\s+no limit$/m);
    const offers = json(await gpr(xdg, ['--json', 'offers', '--gpu', 'H100']));
    assert.deepEqual(
      offers.map((o: { name: string }) => o.name),
      ['H100 PCIe', 'H100 SXM'],
      'cheapest first',
    );
    const cheapRun = await gpr(xdg, ['--json', 'offers', '--gpu', 'H100', '--max-price', '2.50']);
    const cheap = json(cheapRun);
    assert.deepEqual(
      cheap.map((o: { pricePerHourMinor: number }) => o.pricePerHourMinor),
      [249],
    );
    assert.doesNotMatch(cheapRun.stderr, /Warning/);
    // Traffic prices: shown beside the hourly price, and a filter on them.
    assert.match((await gpr(xdg, ['offers', '--gpu', 'L4'])).stdout, /\$0\.03\/GB \/ \$0\.00456\/GB/);
    const names = async (max: string) =>
      json(await gpr(xdg, ['--json', 'offers', '--max-traffic-price', max])).map((o: { name: string }) => o.name);
    assert.ok(!(await names('0')).includes('L4'), 'free traffic only');
    assert.ok((await names('0.03')).includes('L4'));
    const badTraffic = await gpr(xdg, ['offers', '--max-traffic-price', 'cheap']);
    assert.notEqual(badTraffic.code, 0);
    assert.match(badTraffic.stderr, /--max-traffic-price must be USD per GB/);
    // A price typed in cents is named as dollars, with what to type instead; the call still runs as typed.
    const centsRun = await gpr(xdg, ['--json', 'offers', '--gpu', 'H100', '--max-price', '350']);
    assert.equal(json(centsRun).length, 2);
    assert.match(
      centsRun.stderr,
      /^Warning: --max-price 350 is \$350\.00 an hour: amounts are in dollars\. If you meant 350 cents, pass --max-price 3\.50\.$/m,
    );

    const rent = await gpr(xdg, [
      '--json',
      'rent',
      '--gpu',
      TEST_GPU,
      '--max-price',
      '3.00',
      '--budget',
      '5',
      '--wait',
      '--timeout',
      '60',
    ]);
    const rental = json(rent);
    assert.equal(rental.status, 'ACTIVE');
    assert.equal(rental.quote.hourlyPriceMinor, 299);
    assert.match(rental.idempotencyKey, /^[0-9a-f-]{36}$/);
    assert.equal(rent.stderr, '', '--json keeps stderr free of progress');

    const status = json(await gpr(xdg, ['--json', 'status', rental.rentalId]));
    assert.equal(status.status, 'ACTIVE');
    assert.equal(status.deploymentId, rental.deploymentId);
    assert.equal(
      json(await gpr(xdg, ['--json', 'status', rental.rentalId, '--wait', '--timeout', '10'])).status,
      'ACTIVE',
      'a settled rental answers at once',
    );

    const smi = await gpr(xdg, ['ssh', rental.rentalId, '--', 'nvidia-smi']);
    assert.equal(smi.code, 0, smi.stderr);
    assert.match(smi.stdout, /NVIDIA H100 SXM/);
    const keyFile = join(xdg, 'gpr', 'keys', `${rental.deploymentId}.key`);
    assert.equal(statSync(keyFile).mode & 0o777, 0o600);
    assert.match(readFileSync(keyFile, 'utf8'), /PRIVATE KEY/);

    const creds = json(await gpr(xdg, ['--json', 'creds', rental.rentalId]));
    assert.equal(creds.deploymentId, rental.deploymentId);
    assert.match(creds.privateKey, /PRIVATE KEY/);

    const done = json(await gpr(xdg, ['--json', 'terminate', rental.rentalId, '--wait', '--timeout', '60']));
    assert.equal(done.status, 'TERMINATED');
    assert.ok(!Number.isNaN(Date.parse(done.endedAt)), String(done.endedAt));
    const gone = await gpr(xdg, ['ssh', rental.rentalId, '--', 'true']);
    assert.equal(gone.code, 2, 'no ssh to a terminated rental');
    assert.match(gone.stderr, /TERMINATED, not ACTIVE/);

    // The rental's life as events: a page, a human listing, and the stream followed until it ends.
    const ofRental = (events: { type: string; data: { rentalId?: string } }[]) =>
      events.filter((e) => e.data.rentalId === rental.rentalId).map((e) => e.type);
    const page = json(await gpr(xdg, ['--json', 'events', '--after', '0', '--limit', '100']));
    assert.deepEqual(ofRental(page.data), [
      'rental.provisioning',
      'rental.active',
      'rental.terminating',
      'rental.terminated',
    ]);
    const listed = await gpr(xdg, ['events', '--after', '0']);
    assert.match(listed.stdout, new RegExp(`rental\\.active\\s+rental ${rental.rentalId} ACTIVE`));
    assert.match(listed.stdout, new RegExp(`^Next: gpr events --after ${page.nextAfter}$`, 'm'));
    assert.equal((await gpr(xdg, ['events', '--after', 'x'])).code, 2, 'an id is digits');
    const followed = await follow(xdg, (line) => JSON.parse(line).type === 'rental.terminated');
    assert.deepEqual(ofRental(followed.map((l) => JSON.parse(l))), [
      'rental.provisioning',
      'rental.active',
      'rental.terminating',
      'rental.terminated',
    ]);
  });

  it('human mode: tables, state lines as the rental moves, ssh by deployment id, endedAt on terminate', async () => {
    const xdg = home();
    const signup = await gpr(xdg, ['signup']);
    assert.equal(signup.code, 0, signup.stderr);
    assert.match(signup.stdout, /Signed up\. Account [0-9a-f-]{36}/);
    assert.match(signup.stdout, /Token saved to .*config\.json/);
    assert.doesNotMatch(signup.stdout, /gpr_[A-Za-z0-9]{8}\./);

    const topup = await gpr(xdg, ['topup', '12.50']);
    assert.equal(topup.code, 0, topup.stderr);
    assert.match(topup.stdout, /Pay \$12\.50 here/);
    await payTopup(/(http:\/\/\S+\/pay\/[0-9a-f-]{36})/.exec(topup.stdout)![1]);
    const balance = await gpr(xdg, ['balance']);
    assert.match(balance.stdout, /Credits: \$12\.50/);
    assert.match(balance.stdout, /TOPUP\s+\$12\.50/);

    const gpus = await gpr(xdg, ['gpus']);
    assert.match(gpus.stdout, /^model\s+vram\s+offers/m);
    assert.match(gpus.stdout, /H100 SXM\s+80 GB\s+1\s+1\s+\$2\.99/);

    const rent = await gpr(xdg, [
      'rent',
      '--gpu',
      TEST_GPU,
      '--max-price',
      '3',
      '--budget',
      '5',
      '--wait',
      '--timeout',
      '60',
    ]);
    assert.equal(rent.code, 0, rent.stderr);
    // One line per change of status, with the phase as it stood then (a fast start may show none).
    assert.match(
      rent.stderr,
      /^rental (PENDING|PROVISIONING)( \((creating|booting|waiting_for_ssh|checking_gpus|starting)\))?$/m,
      `each state on a line when stderr is not a terminal: ${rent.stderr}`,
    );
    assert.match(rent.stderr, /^rental ACTIVE$/m);
    assert.match(rent.stdout, /^status\s+ACTIVE$/m);
    const rentalId = /^rental\s+([0-9a-f-]{36})$/m.exec(rent.stdout)![1];
    const deploymentId = /^deployment\s+([0-9a-f-]{36})$/m.exec(rent.stdout)![1];
    assert.match(rent.stdout, new RegExp(`Connect: gpr ssh ${rentalId}`));

    const smi = await gpr(xdg, ['ssh', deploymentId, '--', 'nvidia-smi']);
    assert.equal(smi.code, 0, smi.stderr);
    assert.match(smi.stdout, /NVIDIA-SMI/);

    const done = await gpr(xdg, ['terminate', rentalId, '--wait', '--timeout', '60']);
    assert.equal(done.code, 0, done.stderr);
    assert.match(done.stdout, /Terminated; destruction verified at \d{4}-\d\d-\d\dT/);
    assert.match((await gpr(xdg, ['status', rentalId])).stdout, /^status\s+TERMINATED$/m);

    // Terminating again says it already is; credentials now are refused with the status and no retry.
    const again = await gpr(xdg, ['terminate', rentalId, '--wait']);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /^Already TERMINATED: the machine is destroyed/m);
    const again2 = json(await gpr(xdg, ['--json', 'terminate', deploymentId]));
    assert.deepEqual([again2.rentalId, again2.deploymentId, again2.status], [rentalId, deploymentId, 'TERMINATED']);
    const creds = await gpr(xdg, ['creds', rentalId]);
    assert.equal(creds.code, 1, creds.stderr);
    assert.match(
      creds.stderr,
      /^Error DEPLOYMENT_NOT_ACTIVE \(HTTP 409\): .* is TERMINATED\. It will never be ACTIVE again, so do not retry/m,
    );
    assert.match(creds.stderr, /^Next: Waiting does not help: .*rent a new one with `gpr rent`/m);
    const unknown = await gpr(xdg, ['status', '00000000-0000-4000-8000-000000000000']);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /^Next: Nothing with this id is visible to this key .*`gpr rentals`/m);
  });

  it('lists the caller’s rentals newest first (GET /api/v1/rentals)', async () => {
    const xdg = home();
    json(await gpr(xdg, ['--json', 'signup']));
    const first = json(await gpr(xdg, ['--json', 'topup', '5']));
    await payTopup(first.paymentUrl);
    const a = json(
      await gpr(xdg, [
        '--json',
        'rent',
        '--gpu',
        'L4',
        '--max-price',
        '1',
        '--budget',
        '5',
        '--wait',
        '--timeout',
        '60',
      ]),
    );
    json(await gpr(xdg, ['--json', 'terminate', a.rentalId, '--wait', '--timeout', '60']));
    const b = json(await gpr(xdg, ['--json', 'rent', '--gpu', 'L4', '--max-price', '1', '--budget', '5']));
    const page = json(await gpr(xdg, ['--json', 'rentals', '--limit', '10']));
    assert.deepEqual(
      page.data.map((r: { rentalId: string }) => r.rentalId),
      [b.rentalId, a.rentalId],
    );
    assert.equal(page.nextCursor, null);
    const human = await gpr(xdg, ['rentals']);
    assert.match(human.stdout, new RegExp(`^${b.rentalId}\\s+\\w+`, 'm'));
    json(await gpr(xdg, ['--json', 'terminate', b.rentalId, '--wait', '--timeout', '60']));
  });

  it('a refused token: code, message, request id and what to do, exit 3', async () => {
    const xdg = home();
    const env = { GPR_TOKEN: 'gpr_AAAAAAAA.BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB' };
    const human = await gpr(xdg, ['whoami'], env);
    assert.equal(human.code, 3);
    assert.match(human.stderr, /^Error UNAUTHENTICATED \(HTTP 401\): /m);
    assert.match(human.stderr, /^Request id: req_[0-9a-f-]{36}$/m);
    assert.match(
      human.stderr,
      /^Next: .*If it worked before, it was revoked: ask the account owner for a new key or a setup code \(`gpr setup <code>`\); `gpr signup` makes a new, unfunded account/m,
    );
    const machine = await gpr(xdg, ['--json', 'whoami'], env);
    assert.equal(machine.code, 3);
    const { error } = JSON.parse(machine.stdout);
    assert.equal(error.code, 'UNAUTHENTICATED');
    assert.equal(error.status, 401);
    assert.match(error.requestId, REQUEST_ID);
    assert.ok(error.hint);
    const none = await gpr(xdg, ['whoami']);
    assert.equal(none.code, 3, 'no token configured at all');
    assert.match(none.stderr, /NO_TOKEN/);
  });

  it('402 without credits: INSUFFICIENT_CREDITS with the top-up to do next, exit 4', async () => {
    const xdg = home();
    json(await gpr(xdg, ['--json', 'signup']));
    const r = await gpr(xdg, ['rent', '--gpu', TEST_GPU, '--max-price', '3', '--budget', '5']);
    assert.equal(r.code, 4, r.stderr);
    assert.match(r.stderr, /^Error INSUFFICIENT_CREDITS \(HTTP 402\)/m);
    assert.match(r.stderr, /^Request id: req_/m);
    assert.match(r.stderr, /^Next: Add credits: `gpr topup <usd> --wait`/m);
    const [offer] = json(await gpr(xdg, ['--json', 'offers', '--gpu', 'L4']));
    const byOffer = await gpr(xdg, ['--json', 'rent', '--offer', offer.id, '--budget', '5']);
    assert.equal(byOffer.code, 4, byOffer.stdout);
    assert.equal(JSON.parse(byOffer.stdout).error.code, 'INSUFFICIENT_CREDITS');
  });

  it('429: says how many seconds to wait, exit 7', async () => {
    const xdg = home();
    const code = `gps_${'A'.repeat(43)}`;
    let limited: Run | undefined;
    // Two exchanges per minute per address are allowed here; a window boundary may reset the count once.
    for (let i = 0; i < 6 && !limited; i++) {
      const r = await gpr(xdg, ['setup', code], { GPR_RETRIES: '0' });
      if (r.code === 7) limited = r;
      else assert.match(r.stderr, /AGENT_SETUP_INVALID/);
    }
    assert.ok(limited, 'a 429 came back');
    assert.match(limited.stderr, /^Error RATE_LIMITED \(HTTP 429\)/m);
    assert.match(limited.stderr, /^Next: Rate limited: wait \d+ s, then retry\.$/m);
    assert.match(limited.stderr, /^Request id: req_/m);
  });

  it('network down: NETWORK_ERROR with no request id, exit 6; bad usage exits 2', async () => {
    const xdg = home();
    const r = await gpr(xdg, ['gpus'], { GPR_BASE_URL: await closedPortUrl(), GPR_RETRIES: '0' });
    assert.equal(r.code, 6);
    assert.match(r.stderr, /^Error NETWORK_ERROR: Cannot reach http:\/\/127\.0\.0\.1:\d+/m);
    assert.match(r.stderr, /^Request id: none/m);
    assert.match(r.stderr, /^Next: Check GPR_BASE_URL/m);
    const usage = await gpr(xdg, ['rent', '--gpu', 'H100'], { GPR_TOKEN: 'gpr_x' });
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /--max-price/);
    const money = await gpr(xdg, ['--json', 'offers', '--max-price', 'three']);
    assert.equal(money.code, 2);
    assert.equal(JSON.parse(money.stdout).error.code, 'USAGE');
  });
});
