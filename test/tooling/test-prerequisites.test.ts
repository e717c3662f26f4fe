import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../helpers/process.js';

const SCRIPT = 'scripts/test-prerequisites.sh';
/** The real tools the script itself runs; everything else on its PATH is a stub of the test's. */
const REAL_TOOLS = ['bash', 'timeout', 'sleep', 'mkdir', 'chown', 'rm', 'mktemp'];

/**
 * The prerequisites script against a stand-in machine: a PATH of stubs and a prefix for the fixed
 * paths it checks, so packages can be missing, installed and started without touching the system.
 */
describe('scripts/test-prerequisites.sh', function () {
  this.timeout(30_000);
  let dir: string;
  let root: string;
  let bin: string;

  function stub(name: string, body = 'exit 0'): void {
    const path = join(bin, name);
    writeFileSync(path, `#!/bin/bash\n${body}\n`);
    chmodSync(path, 0o755);
  }

  function file(path: string): void {
    mkdirSync(join(root, path, '..'), { recursive: true });
    writeFileSync(join(root, path), '#!/bin/sh\n');
    chmodSync(join(root, path), 0o755);
  }

  function run(env: Record<string, string> = {}, args: string[] = []) {
    const r = spawnSync('/bin/bash', [SCRIPT, ...args], {
      env: { PATH: bin, TEST_PREREQUISITES_ROOT: root, TEST_DATABASE_URL: 'mysql://root@127.0.0.1:3306/', ...env },
      encoding: 'utf8',
    });
    return { status: r.status, lines: `${r.stdout}${r.stderr}`.split('\n').filter(Boolean) };
  }

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'test-prereqs-'));
    root = join(dir, 'root');
    bin = join(dir, 'bin');
    mkdirSync(bin, { recursive: true });
    for (const tool of REAL_TOOLS) {
      const found = ['/usr/bin', '/bin'].map((d) => join(d, tool)).find((p) => existsSync(p));
      symlinkSync(found!, join(bin, tool));
    }
    // A complete machine; each test takes away what it is about.
    for (const tool of ['ssh', 'openssl', 'unshare', 'setpriv', 'mariadb-install-db']) stub(tool);
    file('/usr/bin/chromium');
    file('/usr/sbin/mariadbd');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('says nothing and succeeds when everything is there', () => {
    assert.deepEqual(run(), { status: 0, lines: [] });
  });

  it('stops with one line naming the packages when it cannot install them', () => {
    rmSync(join(root, 'usr/bin/chromium'));
    rmSync(join(bin, 'ssh'));
    // No apt-get on this PATH.
    assert.deepEqual(run(), {
      status: 1,
      lines: [
        'test prerequisites: missing chromium openssh-client; install with: apt-get install chromium openssh-client',
      ],
    });
  });

  it('with --cluster also names what the Galera cluster suite needs, and only then', () => {
    assert.deepEqual(run({}, ['--cluster']), {
      status: 1,
      lines: [
        'test prerequisites: missing galera-4 mariadb-client rsync; install with: apt-get install galera-4 mariadb-client rsync',
      ],
    });
    file('/usr/lib/galera/libgalera_smm.so');
    stub('mariadb');
    stub('rsync');
    assert.deepEqual(run({}, ['--cluster']), { status: 0, lines: [] });
  });

  it('refuses an option it does not know', () => {
    assert.deepEqual(run({}, ['--clustr']), {
      status: 2,
      lines: ['test prerequisites: unknown option --clustr (--dry-run, --cluster)'],
    });
  });

  it('installs a missing package with apt-get as root, in one line, and goes on', function () {
    if (process.getuid?.() !== 0) this.skip();
    rmSync(join(root, 'usr/bin/chromium'));
    const calls = join(dir, 'apt-calls');
    stub(
      'apt-get',
      `echo "$*" >> ${calls}\ncase " $* " in *" install "*) mkdir -p ${root}/usr/bin && printf '#!/bin/sh\\n' > ${root}/usr/bin/chromium && chmod +x ${root}/usr/bin/chromium;; esac`,
    );
    symlinkSync('/bin/chmod', join(bin, 'chmod'));
    assert.deepEqual(run(), { status: 0, lines: ['test prerequisites: installing chromium with apt-get'] });
    // Each call waits for a lock another run holds rather than failing on it.
    assert.deepEqual(readFileSync(calls, 'utf8').trim().split('\n'), [
      '-o DPkg::Lock::Timeout=600 update -qq',
      '-o DPkg::Lock::Timeout=600 install -y -qq chromium',
    ]);
    // Installed: the next run is silent.
    assert.deepEqual(run(), { status: 0, lines: [] });
  });

  it('stops with one line when apt-get fails, after the one saying it tried', function () {
    if (process.getuid?.() !== 0) this.skip();
    rmSync(join(bin, 'setpriv'));
    stub('apt-get', 'echo "E: Unable to locate package" >&2; exit 100');
    const r = run();
    assert.equal(r.status, 1);
    assert.equal(r.lines.length, 2, r.lines.join('\n'));
    assert.equal(r.lines[0], 'test prerequisites: installing util-linux with apt-get');
    const log = /its output is in (\/\S+)$/.exec(r.lines[1]);
    assert.ok(log, r.lines[1]);
    assert.match(r.lines[1], /^test prerequisites: apt-get install util-linux failed; /);
    assert.match(readFileSync(log[1], 'utf8'), /Unable to locate package/);
    rmSync(log[1]);
  });

  it('with --dry-run says what it would install and changes nothing', function () {
    if (process.getuid?.() !== 0) this.skip();
    rmSync(join(root, 'usr/bin/chromium'));
    stub('apt-get', `touch ${dir}/apt-ran`);
    assert.deepEqual(run({}, ['--dry-run']), {
      status: 0,
      lines: ['test prerequisites: would install chromium (apt-get install chromium)'],
    });
    assert.equal(existsSync(join(dir, 'apt-ran')), false);
  });

  it('starts an installed MariaDB that is down, says so, and waits until it answers', async function () {
    if (process.getuid?.() !== 0) this.skip();
    const port = await freePort();
    const pidFile = join(dir, 'server.pid');
    const calls = join(dir, 'ssd-calls');
    stub('start-stop-daemon', `echo "$*" > ${calls}`);
    // The stand-in server comes up at the script's first pause after starting it, so the script can only
    // succeed by waiting; it answers one connection (the script's look) and is gone.
    const server = `const s = require('net').createServer((c) => { c.end(); s.close(); }).listen(${port}, '127.0.0.1')`;
    const realSleep = readlinkSync(join(bin, 'sleep'));
    rmSync(join(bin, 'sleep'));
    stub(
      'sleep',
      `if [ ! -e ${pidFile} ]; then ${process.execPath} -e "${server}" >/dev/null 2>&1 & echo $! > ${pidFile}; fi\nexec ${realSleep} "$@"`,
    );
    try {
      const r = run({ TEST_DATABASE_URL: `mysql://root@127.0.0.1:${port}/` });
      assert.deepEqual(r, { status: 0, lines: [`test prerequisites: starting MariaDB on 127.0.0.1:${port}`] });
      assert.equal(
        readFileSync(calls, 'utf8').trim(),
        `--start --oknodo --background --exec ${root}/usr/sbin/mariadbd`,
      );
      assert.ok(existsSync(join(root, 'run/mysqld')), 'the socket directory is made');
    } finally {
      // Written before the script went on, so it is there whenever the server was started.
      if (existsSync(pidFile)) {
        try {
          process.kill(Number(readFileSync(pidFile, 'utf8')), 'SIGKILL');
        } catch {
          // Already gone.
        }
      }
    }
  });

  it('stops with one line when the MariaDB it started never answers', async function () {
    if (process.getuid?.() !== 0) this.skip();
    const port = await freePort();
    stub('start-stop-daemon');
    assert.deepEqual(
      run({ TEST_DATABASE_URL: `mysql://root@127.0.0.1:${port}/`, TEST_PREREQUISITES_DB_WAIT_SECONDS: '1' }),
      {
        status: 1,
        lines: [
          `test prerequisites: starting MariaDB on 127.0.0.1:${port}`,
          `test prerequisites: MariaDB did not answer at 127.0.0.1:${port} within 1 s of starting; see its error log`,
        ],
      },
    );
  });

  it('does not try to start a database on another machine, and names it', async () => {
    const r = run({ TEST_DATABASE_URL: 'mysql://root@db.invalid:3306/' });
    assert.deepEqual(r, {
      status: 1,
      lines: ['test prerequisites: no MariaDB answers at db.invalid:3306 (TEST_DATABASE_URL); start it there'],
    });
  });
});
