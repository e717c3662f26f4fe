import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { chmod, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import localPlugin from '../../plugins/local/index.js';
import { claimSandboxUids, serviceIdentity, type UidClaimRecord } from '../../plugins/local/uid-claims.js';
import { systemClock } from '../../src/clock.js';
import { createLogger } from '../../src/logger.js';
import type { ProviderDeps } from '../../src/providers/provider.js';
import { testDataSource } from '../helpers/db.js';
import { IGNORE_DRIFT } from '../../src/providers/kit/drift.js';

// Another service's process: it claims a block with the plugin's own code, then holds it until its stdin closes.
const HOLDER = `import { claimSandboxUids } from ${JSON.stringify(resolve('plugins/local/uid-claims.ts'))};
const e = process.env;
await claimSandboxUids({ dir: e.CLAIM_DIR, first: Number(e.CLAIM_FIRST), last: Number(e.CLAIM_LAST), service: e.CLAIM_SERVICE });
process.stdout.write('claimed\\n');
process.stdin.on('end', () => process.exit(0)).resume();`;

describe('local provider: sandbox uid claims', () => {
  let root: string;
  let dir: string;
  const holders: ChildProcess[] = [];

  /** A running process of `service` that claims `first`-`last` in the test's claims directory. */
  async function holdClaim(first: number, last: number, service: string): Promise<ChildProcess> {
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', HOLDER], {
      env: {
        PATH: process.env.PATH ?? '',
        CLAIM_DIR: dir,
        CLAIM_FIRST: String(first),
        CLAIM_LAST: String(last),
        CLAIM_SERVICE: service,
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    holders.push(child);
    let out = '';
    let err = '';
    child.stderr!.on('data', (d) => (err += d));
    await new Promise<void>((done, fail) => {
      child.stdout!.on('data', (d) => {
        out += d;
        if (out.includes('claimed\n')) done();
      });
      child.on('exit', (code) => fail(new Error(`the claim holder exited (${code}) before claiming: ${err}`)));
    });
    return child;
  }

  async function stop(child: ChildProcess): Promise<void> {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.stdin!.end();
    await exited;
  }

  const claimFiles = async () => (await readdir(dir)).filter((n) => n.endsWith('.json'));

  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'uid-claims-test-'));
    dir = join(root, 'run', 'sandbox-uid-claims');
  });

  afterEach(async () => {
    await Promise.all(holders.splice(0).map(stop));
    await rm(root, { recursive: true, force: true });
  });

  it("refuses a block overlapping another service's running claim in one line naming the variables, its pid and range, and a free block", async () => {
    const other = await holdClaim(500_000, 500_099, 'db.example:3306/other');
    assert.equal((await stat(dir)).mode & 0o777, 0o700);
    await assert.rejects(
      () => claimSandboxUids({ dir, first: 500_050, last: 500_149, service: '127.0.0.1:3306/ours' }),
      (err: Error) => {
        assert.doesNotMatch(err.message, /\n/);
        assert.match(err.message, /sandbox uids 500050-500149 overlap uids 500000-500099/);
        assert.match(err.message, new RegExp(`pid ${other.pid}, database db\\.example:3306/other`));
        assert.match(err.message, /LOCAL_PROVIDER_SANDBOX_UID_FIRST=500100 and LOCAL_PROVIDER_SANDBOX_UID_COUNT=100/);
        return true;
      },
    );
    assert.equal((await claimFiles()).length, 1, 'the refused claim is removed');
    // The free block it names is free indeed.
    const moved = await claimSandboxUids({ dir, first: 500_100, last: 500_199, service: '127.0.0.1:3306/ours' });
    await moved.release();
  });

  it('lets the processes of one service share a block, and a release removes only its own claim', async () => {
    await holdClaim(500_000, 500_099, '127.0.0.1:3306/ours');
    const claim = await claimSandboxUids({ dir, first: 500_000, last: 500_099, service: '127.0.0.1:3306/ours' });
    assert.equal((await claimFiles()).length, 2);
    await claim.release();
    await claim.release();
    assert.equal((await claimFiles()).length, 1);
  });

  it('allows a block no other service claims any part of', async () => {
    await holdClaim(500_000, 500_099, 'db.example:3306/other');
    const below = await claimSandboxUids({ dir, first: 499_900, last: 499_999, service: '127.0.0.1:3306/ours' });
    const above = await claimSandboxUids({ dir, first: 500_100, last: 500_199, service: '127.0.0.1:3306/ours' });
    assert.equal((await claimFiles()).length, 3);
    await Promise.all([below.release(), above.release()]);
  });

  it('takes over the claim of a process that is gone, and of a process whose pid another process now has', async () => {
    const gone = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' });
    const [code] = (await once(gone, 'exit')) as [number | null];
    assert.equal(code, 0);
    const alive = await holdClaim(600_000, 600_009, 'db.example:3306/third');
    const stale = (pid: number, started?: string): UidClaimRecord => ({
      pid,
      started,
      first: 500_000,
      last: 500_099,
      service: 'db.example:3306/other',
    });
    await writeFile(join(dir, `${gone.pid}-gone.json`), JSON.stringify(stale(gone.pid!)));
    // The live holder's pid, with another start time: the process that claimed is not the one running now.
    await writeFile(join(dir, `${alive.pid}-reused.json`), JSON.stringify(stale(alive.pid!, '1')));
    const claim = await claimSandboxUids({ dir, first: 500_000, last: 500_099, service: '127.0.0.1:3306/ours' });
    const files = await claimFiles();
    assert.equal(files.length, 2, `the stale claims are removed: ${files.join(', ')}`);
    assert.ok(!files.includes(`${gone.pid}-gone.json`) && !files.includes(`${alive.pid}-reused.json`));
    await claim.release();
  });

  it('refuses a claims directory other users can write, naming LOCAL_PROVIDER_SANDBOX_UID_CLAIMS_DIR', async () => {
    const claim = await claimSandboxUids({ dir, first: 500_000, last: 500_099, service: '127.0.0.1:3306/ours' });
    await claim.release();
    await chmod(dir, 0o777);
    await assert.rejects(
      () => claimSandboxUids({ dir, first: 500_000, last: 500_099, service: '127.0.0.1:3306/ours' }),
      /LOCAL_PROVIDER_SANDBOX_UID_CLAIMS_DIR \(.*\) must be a directory .* no other user can write/,
    );
    assert.throws(
      () => localPlugin.validateOptions({ SANDBOX_UID_CLAIMS_DIR: 'relative/claims' }),
      /LOCAL_PROVIDER_SANDBOX_UID_CLAIMS_DIR must be an absolute path/,
    );
  });

  it("as root, the plugin claims its block for its database at start, refuses another service's and releases its claim on close", async function () {
    if (process.getuid?.() !== 0) this.skip();
    const ds = await testDataSource();
    const deps: ProviderDeps = {
      logger: createLogger('silent'),
      clock: systemClock,
      dataSource: ds,
      production: false,
      labelPrefix: 'x-',
      drift: IGNORE_DRIFT,
    };
    const options = localPlugin.validateOptions({
      SANDBOX_UID_FIRST: '500000',
      SANDBOX_UID_COUNT: '100',
      SANDBOX_UID_CLAIMS_DIR: dir,
    });
    const other = await holdClaim(500_090, 500_189, 'db.example:3306/other');
    await assert.rejects(
      async () => localPlugin.create(options, deps),
      /LOCAL_PROVIDER_SANDBOX_UID_FIRST=500190 and LOCAL_PROVIDER_SANDBOX_UID_COUNT=100/,
    );
    await stop(other);
    // A worker process of the same deployment: the same database.
    await holdClaim(500_000, 500_099, serviceIdentity(ds));
    const provider = await localPlugin.create(options, deps);
    assert.equal((await claimFiles()).length, 2);
    await provider.close?.();
    assert.equal((await claimFiles()).length, 1);
  });
});
