/*
 * Carries out the Dockerfile's stages without a container engine, to show that the runtime image's
 * contents suffice: each stage gets a directory standing for its filesystem, COPY copies from the
 * committed tree (git archive HEAD) or an earlier stage's directory, RUN runs in the stage's
 * WORKDIR with its ENV. Then it starts the runtime stage's ENTRYPOINT with `--role api` against a
 * fresh database, asks /healthz, the inventory and the client releases, runs the HEALTHCHECK, stops
 * the process with SIGTERM and expects exit 0. Prints sizes and timings; exits 1 on any failure.
 *
 *   node --import tsx test/tooling/image-rehearsal.ts [--keep]
 *
 * npm gets a cache of its own (the runtime stage cleans its cache). It needs the npm registry and a MySQL-compatible server at TEST_DATABASE_URL (default
 * mysql://root@127.0.0.1:3306/). Not part of `npm test`: it installs every dependency twice.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { dropDatabase } from '../../src/db/data-source.js';
import { freePort } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';
import { copyOf, envPairs, execForm, parseDockerfile } from './dockerfile.js';

const keep = process.argv.includes('--keep');
const work = mkdtempSync(join(tmpdir(), 'gpu-rental-image-'));
const context = join(work, 'context');
const log = (line: string) => process.stderr.write(`rehearsal: ${line}\n`);
const du = (path: string) => execFileSync('du', ['-sh', path], { encoding: 'utf8' }).split('\t')[0];

mkdirSync(context);
execFileSync('bash', ['-c', `git archive HEAD | tar -x -C '${context}'`]);
const df = parseDockerfile(readFileSync(join(context, 'Dockerfile'), 'utf8'));
const roots: Record<string, string> = {};
let runtime:
  { root: string; workdir: string; env: Record<string, string>; entry: string[]; healthcheck: string[] } | undefined;

for (const stage of df.stages) {
  const root = (roots[stage.name] = join(work, `stage-${stage.name}`));
  mkdirSync(root);
  let workdir = '/';
  let entry: string[] = [];
  let healthcheck: string[] = [];
  const env: Record<string, string> = {};
  const at = (p: string) => join(root, p.startsWith('/') ? p : join(workdir, p));
  const started = Date.now();
  log(`stage ${stage.name} (FROM ${stage.image})`);
  for (const ins of stage.instructions) {
    if (ins.op === 'WORKDIR') {
      workdir = ins.args;
      mkdirSync(at('.'), { recursive: true });
    } else if (ins.op === 'ENV') {
      Object.assign(env, envPairs(ins.args));
    } else if (ins.op === 'COPY') {
      const c = copyOf(ins.args);
      for (const src of c.sources) {
        const from = c.from === undefined ? join(context, src) : join(roots[c.from], src);
        const dest = c.dest.endsWith('/') || c.sources.length > 1 ? join(at(c.dest), basename(src)) : at(c.dest);
        // A directory's contents land in the destination, as COPY does.
        mkdirSync(dirname(dest), { recursive: true });
        cpSync(from, dest, { recursive: true, verbatimSymlinks: true });
      }
    } else if (ins.op === 'RUN') {
      const t = Date.now();
      const r = spawnSync('bash', ['-c', ins.args], {
        cwd: at('.'),
        stdio: ['ignore', 'inherit', 'inherit'],
        env: { PATH: process.env.PATH, HOME: process.env.HOME, npm_config_cache: join(work, 'npm-cache'), ...env },
      });
      if (r.status !== 0) {
        log(`RUN ${ins.args} failed (exit ${r.status})`);
        process.exit(1);
      }
      log(`RUN ${ins.args}: ${((Date.now() - t) / 1000).toFixed(0)} s`);
    } else if (ins.op === 'ENTRYPOINT') {
      entry = execForm(ins.args) ?? [];
    } else if (ins.op === 'HEALTHCHECK') {
      healthcheck = execForm(ins.args.slice(ins.args.indexOf('CMD') + 3).trim()) ?? [];
    }
  }
  log(`stage ${stage.name}: ${((Date.now() - started) / 1000).toFixed(0)} s, ${du(root)}`);
  runtime = { root, workdir, env, entry, healthcheck };
}

const rt = runtime!;
const app = join(rt.root, rt.workdir);
log(
  `runtime contents: ${du(app)} (node_modules ${du(join(app, 'node_modules'))}, dist ${du(join(app, 'dist'))}); tsx installed: ${existsSync(join(app, 'node_modules', 'tsx'))}`,
);

const server = new URL(process.env.TEST_DATABASE_URL ?? 'mysql://root@127.0.0.1:3306/');
server.pathname = `/gpu_rental_image_${randomBytes(3).toString('hex')}`;
const databaseUrl = server.toString();
const port = await freePort();
const [cmd, ...args] = rt.entry;
const svc = spawn(cmd === 'node' ? process.execPath : cmd, [...args, '--role', 'api'], {
  cwd: app,
  env: {
    PATH: process.env.PATH,
    ...rt.env,
    PORT: String(port),
    HOST: '127.0.0.1',
    DATABASE_URL: databaseUrl,
    SECRETS_KEY: randomBytes(32).toString('base64'),
    // The default provider is the local one, which production refuses unless told.
    LOCAL_PROVIDER_ALLOW_PRODUCTION: 'true',
  },
  stdio: ['ignore', 'pipe', 'pipe'],
});
let output = '';
svc.stdout.on('data', (d) => (output += d));
svc.stderr.on('data', (d) => (output += d));
const exited = new Promise<number | null>((r) => svc.on('exit', (code) => r(code)));
let failed = false;
try {
  const t = Date.now();
  const base = `http://127.0.0.1:${port}`;
  await waitFor(async () => (await fetch(`${base}/healthz`)).status === 200, {
    timeoutMs: 120_000,
    what: '/healthz to answer 200',
  });
  log(
    `api answered /healthz 200 after ${((Date.now() - t) / 1000).toFixed(1)} s (fresh database: created and migrated)`,
  );
  for (const path of ['/api/v1/gpus', '/docs', '/releases/latest.json']) {
    const status = (await fetch(`${base}${path}`)).status;
    log(`GET ${path}: ${status}`);
    if (status !== 200) failed = true;
  }
  const [hcCmd, ...hcArgs] = rt.healthcheck;
  const hc = spawnSync(hcCmd === 'node' ? process.execPath : hcCmd, [...hcArgs, String(svc.pid)], {
    cwd: app,
    env: { PATH: process.env.PATH, ...rt.env, PORT: String(port), HOST: '127.0.0.1' },
  });
  log(`HEALTHCHECK: exit ${hc.status}`);
  if (hc.status !== 0) failed = true;
} catch (err) {
  log((err as Error).message);
  failed = true;
} finally {
  svc.kill('SIGTERM');
  const code = await exited;
  log(`SIGTERM: exit ${code}`);
  if (code !== 0) failed = true;
  await dropDatabase(databaseUrl);
  if (failed) process.stderr.write(output);
  if (!keep) rmSync(work, { recursive: true, force: true });
  else log(`kept ${work}`);
}
process.exit(failed ? 1 : 0);
