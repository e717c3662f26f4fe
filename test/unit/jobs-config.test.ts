import assert from 'node:assert/strict';
import { loadConfig } from '../../src/config.js';

describe('jobs: JOBS_CLAIM', () => {
  it('is skip-locked unless set, takes update in any case, and refuses anything else at start', () => {
    assert.equal(loadConfig({}).jobs.claim, 'skip-locked');
    assert.equal(loadConfig({ JOBS_CLAIM: ' UPDATE ' }).jobs.claim, 'update');
    assert.throws(() => loadConfig({ JOBS_CLAIM: 'nowait' }), /JOBS_CLAIM must be skip-locked or update, got "nowait"/);
  });
});

describe('jobs: Agendash at /admin/jobs', () => {
  it('refuses a dashboard password shorter than 12 characters at start', () => {
    assert.throws(
      () => loadConfig({ ADMIN_JOBS_USER: 'ops', ADMIN_JOBS_PASSWORD: 'hunter2' }),
      /ADMIN_JOBS_PASSWORD must be at least 12 characters/,
    );
  });
});
