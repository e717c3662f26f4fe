import assert from 'node:assert/strict';
import { ConfigError, configErrorLine, loadConfig, parseRoles } from '../../src/config.js';

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
    assert.equal(startupError(() => loadConfig({ PORT: 'http' })), 'Configuration error: PORT must be a whole number, got "http"');
  });

  it('rejects an unknown --role', () => {
    assert.match(startupError(() => parseRoles(['--role', 'cron'])), /--role must be one of api, worker, bot/);
  });

  it('reads --role in both spellings, comma-separated, and defaults to every role', () => {
    assert.deepEqual(parseRoles(['--role', 'api,worker']), ['api', 'worker']);
    assert.deepEqual(parseRoles(['--role=bot']), ['bot']);
    assert.deepEqual(parseRoles([]), ['api', 'worker', 'bot']);
  });
});
