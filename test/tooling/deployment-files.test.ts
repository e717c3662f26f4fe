import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../helpers/process.js';

const read = (path: string) => readFileSync(path, 'utf8');

// What the files say is checked in test/unit/deployment-files.test.ts; these run a process against them.
describe('deployment files', function () {
  this.timeout(30_000);

  describe('Dockerfile', () => {
    it('the health check asks /healthz of an api process, and takes a worker being alive as healthy', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'gpu-rental-hc-'));
      // A stand-in service under the entry point's name: it answers /healthz with STATUS when it has the api role.
      mkdirSync(join(dir, 'dist', 'src'), { recursive: true });
      writeFileSync(
        join(dir, 'dist', 'src', 'main.js'),
        `const api = process.argv.slice(2).join(' ').includes('api');
         if (api) require('http').createServer((q, r) => { r.statusCode = q.url === '/healthz' ? Number(process.env.STATUS) : 404; r.end(); }).listen(Number(process.env.PORT), '127.0.0.1', () => console.log('up'));
         else { console.log('up'); setInterval(() => {}, 1000); }`,
      );
      writeFileSync(join(dir, 'package.json'), '{"type":"commonjs"}');
      const check = async (role: string, status: number) => {
        const port = await freePort();
        const env = { ...process.env, PORT: String(port), STATUS: String(status), HOST: '0.0.0.0' };
        const svc = spawn(process.execPath, [join(dir, 'dist', 'src', 'main.js'), '--role', role], {
          env,
          stdio: ['ignore', 'pipe', 'inherit'],
        });
        try {
          await new Promise<void>((resolve) => svc.stdout.once('data', () => resolve()));
          return spawnSync(process.execPath, ['deploy/container/healthcheck.mjs', String(svc.pid)], {
            env,
            encoding: 'utf8',
          }).status;
        } finally {
          svc.kill();
          await new Promise((r) => svc.once('exit', r));
        }
      };
      try {
        assert.equal(await check('api', 200), 0);
        assert.equal(await check('api,worker', 503), 1, 'a 503 (database down or not migrated) is unhealthy');
        assert.equal(await check('worker', 503), 0, 'no port to ask');
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });

  describe('systemd units', () => {
    const dir = 'deploy/systemd';
    const units = readdirSync(dir).filter((f) => /\.(service|target)$/.test(f));

    it('systemd-analyze verify accepts them, without a warning', function () {
      const analyze = '/usr/bin/systemd-analyze';
      // Where systemd is not installed the strict read above is the check.
      if (!existsSync(analyze)) return;
      const tmp = mkdtempSync(join(tmpdir(), 'gpu-rental-units-'));
      try {
        // verify checks that ExecStart's program exists: point it at this machine's node.
        const names: string[] = [];
        for (const f of units) {
          const text = read(join(dir, f)).replace(/^ExecStart=\S+/m, `ExecStart=${process.execPath}`);
          const name = f.replace('@.', f.includes('api') ? '@8081.' : '@1.');
          writeFileSync(join(tmp, name), text);
          names.push(join(tmp, name));
        }
        const r = spawnSync(analyze, ['verify', '--man=no', ...names], {
          encoding: 'utf8',
          env: { ...process.env, SYSTEMD_LOG_COLOR: '0' },
        });
        assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
        assert.equal(`${r.stdout}${r.stderr}`.trim(), '', 'no warning (an unknown key is only a warning)');
      } finally {
        rmSync(tmp, { recursive: true, force: true });
      }
    });
  });
});
