import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { assertSafeToRun, ConfigError, configErrorLine, loadConfig, parseRoles } from '../../src/config.js';
import { offSurfaces } from '../../src/operator-surfaces.js';
import { spawnService } from '../helpers/process.js';

/** What the service prints and exits 1 on, before it touches anything (src/main.ts). */
function startupError(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    return configErrorLine(err);
  }
  assert.fail('expected a configuration error');
}

describe('start-up arguments and configuration', () => {
  it('names the variable when the configuration is invalid', () => {
    assert.equal(
      startupError(() => loadConfig({ PORT: 'http' })),
      'Configuration error: PORT must be a whole number from 0 to 65535, got "http"',
    );
  });

  it('rejects an unknown --role', () => {
    assert.match(
      startupError(() => parseRoles(['--role', 'cron'])),
      /--role must be one of api, worker, bot/,
    );
  });

  it('reads --role in both spellings, comma-separated, and defaults to every role', () => {
    assert.deepEqual(parseRoles(['--role', 'api,worker']), ['api', 'worker']);
    assert.deepEqual(parseRoles(['--role=bot']), ['bot']);
    assert.deepEqual(parseRoles([]), ['api', 'worker', 'bot']);
  });

  it('runs the local provider on the public development SECRETS_KEY only in an explicit development run', () => {
    for (const env of [{}, { NODE_ENV: 'staging' }, { NODE_ENV: 'test' }]) {
      assert.match(
        startupError(() => assertSafeToRun(loadConfig(env))),
        /NODE_ENV=development is set explicitly.*SECRETS_KEY/,
        JSON.stringify(env),
      );
    }
    assertSafeToRun(loadConfig({ NODE_ENV: 'development' }));
    assertSafeToRun(loadConfig({ SECRETS_KEY: randomBytes(32).toString('base64') }));
    assertSafeToRun(loadConfig({ PROVIDERS: 'vast', VAST_PROVIDER_API_KEY: 'k' }));
  });

  it('a service started without NODE_ENV on the local provider and the development key exits at once, naming the fix', async () => {
    const svc = spawnService([], { NODE_ENV: '', DATABASE_URL: 'mysql://root@127.0.0.1:1/never_reached' });
    const code = await svc.exited;
    assert.equal(code, 1);
    assert.match(svc.stderr(), /^Configuration error: the local provider with the built-in development SECRETS_KEY/m);
  });
});

describe('start lines for what is off', () => {
  it('names the settings that turn metrics and the jobs dashboard on, and says nothing of what is on', () => {
    const off = { metrics: {}, jobs: {} };
    const lines = offSurfaces(off, ['api', 'worker']);
    assert.equal(lines.length, 2);
    assert.match(lines[0], /^metrics are off: set METRICS_TOKEN .* or METRICS_PORT/);
    assert.match(lines[1], /^the jobs dashboard is off: set ADMIN_JOBS_USER and ADMIN_JOBS_PASSWORD/);
    assert.deepEqual(
      offSurfaces({ ...off, metrics: { port: 9464 } }, ['worker']),
      [],
      'a worker serves no dashboard; metrics are on',
    );
    assert.deepEqual(
      offSurfaces({ metrics: { token: 't' }, jobs: { dashboardUser: 'u', dashboardPassword: 'p' } }, ['api']),
      [],
    );
  });
});
