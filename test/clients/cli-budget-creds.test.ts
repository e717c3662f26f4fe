import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildClients, GPR_BIN, run, type Run } from './helpers/build.js';
import { payTopup, startService, TEST_GPU, type RunningService } from './helpers/service.js';

/** `gpr rent --budget` against the key's per-rental cap, and the key file `gpr creds` names, as an agent meets them. */
describe('gpr rent budgets and gpr creds key files (built binary against the running service)', function () {
  this.timeout(120_000);
  let service: RunningService;
  let xdg: string;

  before(async () => {
    buildClients();
    service = await startService();
    // A signup key: its per-rental cap is the default $5.00.
    xdg = mkdtempSync(join(tmpdir(), 'gpr-home-'));
    assert.equal((await gpr(['signup'])).code, 0);
    const topup = await gpr(['topup', '20']);
    await payTopup(/(http:\/\/\S+\/pay\/[0-9a-f-]{36})/.exec(topup.stdout)![1]);
  });
  after(async () => {
    await service?.stop();
  });

  const gpr = (args: string[]) =>
    run(GPR_BIN, args, { HOME: xdg, XDG_CONFIG_HOME: xdg, GPR_BASE_URL: service.baseUrl });
  const ok = (r: Run) => {
    assert.equal(r.code, 0, `exit ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
    return r;
  };

  it("a --budget above the key's per-rental cap is refused (exit 4) with the cap and the next step, and nothing is rented", async () => {
    const r = await gpr(['rent', '--gpu', TEST_GPU, '--max-price', '3', '--budget', '10']);
    assert.equal(r.code, 4, r.stderr);
    assert.match(r.stderr, /KEY_LIMIT_EXCEEDED/);
    assert.match(
      r.stderr,
      /budgetMinor 1000 \(\$10\.00\) is above this key's per-rental cap, maxPerRentalMinor 500 \(\$5\.00\)/,
    );
    assert.match(r.stderr, /send budgetMinor of at most 500, leave it out to stop at the cap/);
    const list = JSON.parse(ok(await gpr(['--json', 'rentals'])).stdout);
    assert.equal(list.data.length, 0, 'nothing was rented');

    const json = await gpr(['--json', 'rent', '--gpu', TEST_GPU, '--max-price', '3', '--budget', '10']);
    assert.equal(json.code, 4);
    assert.equal(JSON.parse(json.stdout).error.code, 'KEY_LIMIT_EXCEEDED');
  });

  it("the cap that stops a rental is printed: the key's cap without --budget, the budget with one", async () => {
    const capped = ok(await gpr(['rent', '--gpu', TEST_GPU, '--max-price', '3']));
    assert.match(
      capped.stderr,
      /^Stops when it has cost \$5\.00 \(this key's per-rental cap; pass a budget to set your own, up to the cap\)\.$/m,
    );
    const id = /^rental\s+([0-9a-f-]{36})$/m.exec(capped.stdout)![1];
    ok(await gpr(['terminate', id, '--wait', '--timeout', '60']));
    const budgeted = ok(await gpr(['rent', '--gpu', TEST_GPU, '--max-price', '3', '--budget', '5']));
    assert.match(budgeted.stderr, /^Stops when it has cost \$5\.00 \(your budget\)\.$/m);
    const again = /^rental\s+([0-9a-f-]{36})$/m.exec(budgeted.stdout)![1];
    ok(await gpr(['terminate', again, '--wait', '--timeout', '60']));
  });

  it('gpr creds writes the key file its ssh command names (mode 0600, the revealed key) and prints its path', async () => {
    const rental = JSON.parse(
      ok(
        await gpr([
          '--json',
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
        ]),
      ).stdout,
    );
    try {
      const human = ok(await gpr(['creds', rental.rentalId]));
      const keyFile = /^key file\s+(\S+)$/m.exec(human.stdout)?.[1];
      const command = /^command\s+(.+)$/m.exec(human.stdout)?.[1];
      assert.ok(keyFile && command, human.stdout);
      assert.ok(command.includes(`-i ${keyFile}`), `the ssh command uses the printed key file: ${command}`);
      assert.ok(existsSync(keyFile), keyFile);
      assert.equal(statSync(keyFile).mode & 0o777, 0o600);
      const printedKey = /(-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]+?-----END [A-Z ]*PRIVATE KEY-----)/.exec(
        human.stdout,
      )![1];
      assert.equal(readFileSync(keyFile, 'utf8').trim(), printedKey.trim());

      const json = JSON.parse(ok(await gpr(['--json', 'creds', rental.deploymentId])).stdout);
      assert.equal(json.keyFile, keyFile, 'the same file by deployment id');
      assert.ok(json.sshCommand.includes(`-i ${keyFile}`));
      assert.equal(statSync(json.keyFile).mode & 0o777, 0o600);
      assert.equal(readFileSync(json.keyFile, 'utf8').trim(), json.privateKey.trim());
    } finally {
      ok(await gpr(['terminate', rental.rentalId, '--wait', '--timeout', '60']));
    }
  });
});
