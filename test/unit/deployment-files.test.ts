import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, posix } from 'node:path';
import { parseRoles } from '../../src/config.js';
import { CONFIG_VARIABLES } from '../../src/config-variables.js';
import { copyOf, envPairs, execForm, parseDockerfile, type Stage } from '../tooling/dockerfile.js';

const read = (path: string) => readFileSync(path, 'utf8');

/** The V8 flags the image's entry point starts node with: every other launch of the service uses the same. */
function productionNodeFlags(): string[] {
  const runtime = parseDockerfile(read('Dockerfile')).stages.at(-1)!;
  const entry = execForm(runtime.instructions.filter((i) => i.op === 'ENTRYPOINT').at(-1)?.args ?? '') ?? [];
  return entry.slice(1, entry.indexOf('dist/src/main.js'));
}

/** A base image a rebuild cannot silently move: a full x.y.z tag or a digest, never latest. */
function pinned(image: string): boolean {
  if (/:latest(@|$)/.test(image)) return false;
  return /@sha256:[0-9a-f]{64}$/.test(image) || /^[^:@]+:\d+\.\d+\.\d+[\w.-]*$/.test(image);
}

const SECRET_NAME = /SECRET|TOKEN|PASSWORD|PASSWD|_KEY$|^KEY|CREDENTIAL/i;

/** The seconds after which src/main.ts forces its exit once a shutdown began. */
function forcedExitSeconds(): number {
  const m = /setTimeout\(\(\) => process\.exit\(1\), ([\d_]+)\)/.exec(read('src/main.ts'));
  assert.ok(m, 'src/main.ts forces its exit with a timer');
  return Number(m[1].replaceAll('_', '')) / 1000;
}

function ops(stage: Stage, op: string): string[] {
  return stage.instructions.filter((i) => i.op === op).map((i) => i.args);
}

/** Whether a .dockerignore pattern list leaves `path` out of the build context (plain paths and `*` / `**` globs). */
function ignored(patterns: string[], path: string): boolean {
  const toRe = (p: string) =>
    new RegExp(
      `^${p
        .replace(/[.+^${}()|[\]\\]/g, '\\$&')
        .replace(/\*\*\//g, '(?:.*/)?')
        .replace(/\*/g, '[^/]*')}(?:/.*)?$`,
    );
  return patterns.some((p) => toRe(p.replace(/^\/|\/$/g, '')).test(path));
}

describe('deployment files', () => {
  it('npm start runs node with the same flags as the image and the units', () => {
    assert.equal(
      JSON.parse(read('package.json')).scripts.start,
      `node ${productionNodeFlags().join(' ')} scripts/start.mjs`,
    );
  });

  describe('Dockerfile', () => {
    const df = parseDockerfile(read('Dockerfile'));
    const build = df.stages[0];
    const runtime = df.stages.at(-1)!;
    const dockerignore = read('.dockerignore')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'));

    it('builds in one stage and runs from another, both on a pinned base image', () => {
      assert.equal(pinned('node'), false);
      assert.equal(pinned('node:latest'), false);
      assert.equal(pinned('node:20-slim'), false, 'a major version moves');
      assert.equal(pinned('node:20.19.5-bookworm-slim'), true);
      assert.ok(df.stages.length >= 2, 'multi-stage');
      for (const s of df.stages) assert.ok(pinned(s.image), `stage ${s.name}: ${s.image} is pinned`);
      assert.ok(
        ops(build, 'RUN').some((r) => /\bnpm ci\b/.test(r) && !r.includes('--omit=dev')),
        'the build stage installs dev dependencies',
      );
      assert.ok(
        ops(build, 'RUN').some((r) => /\bnpm run build\b/.test(r)),
        'the build stage compiles with scripts/build.mjs',
      );
      assert.match(JSON.parse(read('package.json')).scripts.build, /scripts\/build\.mjs/);
      assert.ok(
        ops(runtime, 'RUN').some((r) => /\bnpm ci\b.*--omit=dev/.test(r)),
        'the runtime stage installs production dependencies only',
      );
    });

    it('runs as a user other than root, with NODE_ENV=production and nothing secret in ENV or ARG', () => {
      const user = ops(runtime, 'USER').at(-1);
      assert.ok(user && !/^(root|0)(:|$)/.test(user), `USER ${user}`);
      const env = Object.assign({}, ...ops(runtime, 'ENV').map(envPairs)) as Record<string, string>;
      assert.equal(env.NODE_ENV, 'production');
      const names = [
        ...df.stages.flatMap((s) => ops(s, 'ENV').flatMap((e) => Object.keys(envPairs(e)))),
        ...Object.keys(df.args),
        ...df.stages.flatMap((s) => ops(s, 'ARG').map((a) => a.split('=')[0])),
      ];
      assert.deepEqual(
        names.filter((n) => SECRET_NAME.test(n)),
        [],
      );
      assert.equal(ops(runtime, 'EXPOSE').join(' '), env.PORT, 'exposes the port it listens on');
    });

    it('fetches nothing with ADD and copies only what the repository has or an earlier stage made', () => {
      assert.deepEqual(
        df.stages.flatMap((s) => ops(s, 'ADD')),
        [],
        'COPY, never ADD (no URLs, no archives unpacked)',
      );
      // What an earlier stage holds: what it copied in, and what its RUN steps produce.
      const made: Record<string, RegExp> = {
        dist: /\bnpm run build\b/,
        releases: /\bnpm run release\b/,
        node_modules: /\bnpm ci\b/,
      };
      df.stages.forEach((stage, i) => {
        const workdir = ops(stage, 'WORKDIR').at(0) ?? '/';
        for (const args of ops(stage, 'COPY')) {
          const c = copyOf(args);
          for (const src of c.sources) {
            if (c.from === undefined) {
              assert.ok(existsSync(src), `COPY ${src}: in the repository`);
              assert.ok(!ignored(dockerignore, posix.normalize(src)), `COPY ${src}: not left out by .dockerignore`);
              continue;
            }
            const from = df.stages.slice(0, i).find((s) => s.name === c.from);
            assert.ok(from, `COPY --from=${c.from}: an earlier stage`);
            const fromDir = ops(from, 'WORKDIR').at(0) ?? '/';
            const rel = posix.relative(fromDir, src);
            assert.ok(!rel.startsWith('..'), `COPY --from=${c.from} ${src}: under that stage's WORKDIR ${fromDir}`);
            const top = rel.split('/')[0];
            const copied = ops(from, 'COPY').some((a) => copyOf(a).sources.some((s) => s.split('/')[0] === top));
            const ran = made[top] !== undefined && ops(from, 'RUN').some((r) => made[top].test(r));
            assert.ok(copied || ran, `COPY --from=${c.from} ${src}: ${from.name} copies or makes ${top}`);
          }
        }
        assert.ok(workdir.startsWith('/'), `stage ${stage.name}: absolute WORKDIR`);
      });
      for (const must of ['.git', 'node_modules', '.env'])
        assert.ok(ignored(dockerignore, must), `.dockerignore leaves out ${must}`);
    });

    it('starts the built entry point with the roles as its command, and checks /healthz', () => {
      const entry = execForm(ops(runtime, 'ENTRYPOINT').at(-1) ?? '');
      assert.deepEqual(entry, ['node', ...productionNodeFlags(), 'dist/src/main.js']);
      // The smaller young generation is what keeps an idle api process under 120 MB (bench:http).
      assert.deepEqual(productionNodeFlags(), ['--max-semi-space-size=8']);
      // dist/src/main.js is what `npm run build` makes of src/main.ts: tsc over tsconfig.build.json.
      const buildConfig = JSON.parse(read('tsconfig.build.json'));
      const base = JSON.parse(read(buildConfig.extends ?? 'tsconfig.json'));
      assert.equal(base.compilerOptions.outDir, 'dist');
      assert.equal(base.compilerOptions.rootDir, '.');
      assert.ok(
        buildConfig.include.includes('src') && buildConfig.include.includes('migrations'),
        'the build compiles src and the migrations',
      );
      assert.ok(existsSync('src/main.ts'));
      assert.ok(
        ops(runtime, 'COPY').some((a) => copyOf(a).from === build.name && copyOf(a).sources.includes('/app/dist')),
      );
      assert.equal(ops(runtime, 'WORKDIR').at(-1), '/app');
      const cmd = execForm(ops(runtime, 'CMD').at(-1) ?? '');
      assert.ok(cmd, 'CMD in exec form');
      assert.deepEqual(parseRoles(cmd), ['api', 'worker', 'bot']);
      assert.ok(ops(runtime, 'STOPSIGNAL').includes('SIGTERM'));
      const hc = ops(runtime, 'HEALTHCHECK').at(-1);
      assert.ok(hc, 'HEALTHCHECK');
      const script = execForm(hc.slice(hc.indexOf('CMD') + 3).trim())!;
      assert.equal(script[0], 'node');
      assert.ok(
        ops(runtime, 'COPY').some((a) => copyOf(a).sources.includes(script[1])),
        `${script[1]} is in the image`,
      );
      assert.match(read(script[1]), /\/healthz/);
    });
  });

  describe('systemd units', () => {
    const dir = 'deploy/systemd';
    const units = readdirSync(dir).filter((f) => /\.(service|target)$/.test(f));

    /** A strict INI read: [Section] headers, Key=Value lines, comments; anything else throws. */
    function parseUnit(file: string): Record<string, Record<string, string[]>> {
      const out: Record<string, Record<string, string[]>> = {};
      let section: Record<string, string[]> | undefined;
      read(join(dir, file))
        .split('\n')
        .forEach((line, i) => {
          if (/^\s*([#;].*)?$/.test(line)) return;
          const head = /^\[([A-Za-z]+)\]$/.exec(line);
          if (head) {
            assert.ok(!out[head[1]], `${file}:${i + 1}: [${head[1]}] twice`);
            section = out[head[1]] = {};
            return;
          }
          const kv = /^([A-Za-z]+)=(.*)$/.exec(line);
          assert.ok(kv && section, `${file}:${i + 1}: not Key=Value inside a section: ${line}`);
          (section[kv[1]] ??= []).push(kv[2]);
        });
      return out;
    }

    it('has an api template (instance = port), a worker template, the bot and a target', () => {
      assert.deepEqual(units.sort(), [
        'gpu-rental-api@.service',
        'gpu-rental-bot.service',
        'gpu-rental-worker@.service',
        'gpu-rental.target',
      ]);
    });

    it('each service runs one role of the built service, hardened, restarted on failure, and stopped by SIGTERM within the drain deadline', () => {
      const deadline = forcedExitSeconds();
      for (const file of units.filter((f) => f.endsWith('.service'))) {
        const u = parseUnit(file);
        const s = u.Service;
        const one = (k: string) => {
          assert.equal(s[k]?.length, 1, `${file}: one ${k}=`);
          return s[k][0];
        };
        assert.ok(u.Unit.Description?.[0], `${file}: Description`);
        const [node, ...args] = one('ExecStart').split(/\s+/);
        const flags = productionNodeFlags();
        assert.deepEqual(args.slice(0, flags.length), flags, `${file}: node runs with the image's flags`);
        const exec = [node, ...args.slice(flags.length)];
        assert.ok(
          exec[0].startsWith('/') && exec[1].endsWith('/dist/src/main.js') && exec[2] === '--role',
          `${file}: ExecStart runs node dist/src/main.js --role`,
        );
        const role = /gpu-rental-(\w+)/.exec(file)![1];
        assert.deepEqual(parseRoles(exec.slice(2)), [role]);
        assert.ok(one('User') !== 'root', `${file}: a user of its own`);
        assert.equal(one('Restart'), 'on-failure');
        assert.equal(one('KillSignal'), 'SIGTERM');
        const stop = Number(one('TimeoutStopSec'));
        assert.ok(
          stop > deadline && stop <= deadline + 15,
          `${file}: TimeoutStopSec ${stop} just over the service's own ${deadline} s`,
        );
        for (const [k, v] of Object.entries({
          NoNewPrivileges: 'yes',
          ProtectSystem: 'strict',
          PrivateTmp: 'yes',
          ProtectHome: 'yes',
        }))
          assert.equal(one(k), v, `${file}: ${k}`);
        assert.equal(one('EnvironmentFile'), '/etc/gpu-rental/gpu-rental.env');
        assert.deepEqual(u.Install.WantedBy, ['gpu-rental.target']);
        if (role === 'api') assert.deepEqual(s.Environment, ['PORT=%i']);
      }
    });

    it('the environment file example sets only documented variables, no PORT, and no secret values', () => {
      const known = new Set(CONFIG_VARIABLES.map((v) => v.name));
      const plugins = readdirSync('plugins')
        .filter((p) => statSync(join('plugins', p)).isDirectory())
        .map((p) => p.toUpperCase().replaceAll('-', '_'));
      const lines = read('deploy/gpu-rental.env.example')
        .split('\n')
        .filter((l) => l.trim() && !l.startsWith('#'));
      assert.ok(lines.length > 5);
      for (const line of lines) {
        const m = /^([A-Z][A-Z0-9_]*)=(.*)$/.exec(line);
        assert.ok(m, `KEY=value: ${line}`);
        const [, name, value] = m;
        assert.ok(
          known.has(name) || plugins.some((p) => name.startsWith(`${p}_PROVIDER_`)),
          `${name} is in src/config-variables.ts`,
        );
        assert.notEqual(name, 'PORT', 'each api instance sets PORT');
        if (SECRET_NAME.test(name) && name !== 'SECRETS_KEY_ID') assert.equal(value, '', `${name} is left blank`);
      }
      assert.match(read('deploy/gpu-rental.env.example'), /NODE_ENV=production/);
    });
  });
});
