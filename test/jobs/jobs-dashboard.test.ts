import { agendaQueueOf } from '../../src/jobs/agenda.js';
import assert from 'node:assert/strict';
import type { KeyKind } from '../../src/modules/keys/api-key.entity.js';
import { AGENDA_JOBS_TABLE } from '../../src/jobs/mysql-jobs.repository.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { DASHBOARD_FAILED_LOGINS_PER_ADDRESS, DASHBOARD_FAILED_LOGINS_TOTAL } from '../../src/jobs/jobs-dashboard.js';
import { signup } from '../helpers/factories.js';

const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

describe('jobs: Agendash at /admin/jobs', () => {
  it('is not mounted unless its credentials are configured', async () => {
    const ctx = await createTestContext();
    try {
      const res = await ctx.api.get('/admin/jobs/').set('Authorization', basic('ops', 'x'));
      assert.equal(res.status, 404);
    } finally {
      await ctx.close();
    }
  });

  it('refuses basic auth with 429 after ten wrong guesses from one address, the right password included, per address and in total', async () => {
    const ctx = await createTestContext({
      env: { ADMIN_JOBS_USER: 'ops', ADMIN_JOBS_PASSWORD: 'correct horse', TRUST_PROXY: 'loopback' },
    });
    try {
      ctx.clock.set(new Date(Date.UTC(2033, 0, 1, 0, Math.floor(Math.random() * 500_000), 5)));
      const from = (address: string, auth: string) =>
        ctx.api.get('/admin/jobs/').set('X-Forwarded-For', address).set('Authorization', auth);
      const guesses = [];
      for (let i = 0; i < DASHBOARD_FAILED_LOGINS_PER_ADDRESS; i++)
        guesses.push((await from('198.51.100.1', basic('ops', `guess-${i}`))).status);
      assert.ok(
        guesses.every((s) => s === 401),
        guesses.join(','),
      );
      const locked = await from('198.51.100.1', basic('ops', 'correct horse'));
      assert.equal(locked.status, 429);
      assert.equal(locked.body.error.code, 'RATE_LIMITED');
      assert.ok(Number(locked.headers['retry-after']) >= 1);
      assert.equal(
        (await from('198.51.100.2', basic('ops', 'correct horse'))).status,
        200,
        'another address is not locked out',
      );
      // Guesses spread over many addresses meet the total.
      let status = 0;
      for (let i = 0; i < DASHBOARD_FAILED_LOGINS_TOTAL; i++)
        status = (await from(`203.0.113.${i}`, basic('ops', 'nope'))).status;
      assert.equal(status, 429);
      ctx.clock.advance(60_000);
      assert.equal(
        (await from('198.51.100.1', basic('ops', 'correct horse'))).status,
        200,
        'the next minute admits again',
      );
    } finally {
      await ctx.close();
    }
  });

  describe('when configured', () => {
    let ctx: TestContext;
    const ok = basic('ops', 'correct horse');

    before(async () => {
      ctx = await createTestContext({ env: { ADMIN_JOBS_USER: 'ops', ADMIN_JOBS_PASSWORD: 'correct horse' } });
    });
    after(() => ctx.close());

    async function key(kind: KeyKind, isAdmin: boolean): Promise<string> {
      const { accountId } = await signup(ctx);
      const { token } = await ctx.services.store.read((r) =>
        ctx.services.keys.create(r.accounts, {
          accountId,
          kind,
          name: 'ops',
          scopes: ['read'],
          origin: 'signup',
          isAdmin,
          maxPerRentalMinor: 0,
          budgetLimitMinor: 0,
          maxConcurrentDeployments: 0,
        }),
      );
      return token;
    }

    it('asks for basic auth and refuses wrong credentials', async () => {
      const none = await ctx.api.get('/admin/jobs/');
      assert.equal(none.status, 401);
      assert.match(String(none.headers['www-authenticate']), /^Basic realm="jobs"/);
      assert.equal(none.body.error.code, 'UNAUTHENTICATED');
      assert.equal((await ctx.api.get('/admin/jobs/').set('Authorization', basic('ops', 'wrong'))).status, 401);
      assert.equal(
        (await ctx.api.get('/admin/jobs/').set('Authorization', basic('root', 'correct horse'))).status,
        401,
      );
    });

    it('serves the dashboard and lists jobs from the MySQL backend', async () => {
      const page = await ctx.api.get('/admin/jobs/').set('Authorization', ok);
      assert.equal(page.status, 200);
      assert.match(page.text, /<html/i);
      await agendaQueueOf(ctx.services.jobs).schedule(new Date(Date.now() + 3_600_000), 'dash.example', {
        deploymentId: 'd-1',
      });
      const api = await ctx.api.get('/admin/jobs/api').query({ job: 'dash.example' }).set('Authorization', ok);
      assert.equal(api.status, 200, JSON.stringify(api.body));
      const overview = api.body.overview.find((o: { displayName: string }) => o.displayName === 'dash.example');
      assert.equal(overview.scheduled, 1);
      assert.equal(api.body.jobs.length, 1);
      assert.deepEqual(api.body.jobs[0].job.data, { deploymentId: 'd-1' });
    });

    it('pauses and deletes a job through the dashboard API', async () => {
      await agendaQueueOf(ctx.services.jobs).schedule(new Date(Date.now() + 3_600_000), 'dash.example', {
        deploymentId: 'd-2',
      });
      const [row] = await ctx.services.ds.query(
        `SELECT id FROM ${AGENDA_JOBS_TABLE} WHERE name = 'dash.example' AND JSON_VALUE(data, '$.deploymentId') = 'd-2'`,
      );
      const id = String(row.id);
      const paused = await ctx.api
        .post('/admin/jobs/api/jobs/pause')
        .set('Authorization', ok)
        .send({ jobIds: [id] });
      assert.equal(paused.status, 200, JSON.stringify(paused.body));
      assert.equal(
        Number(
          (await ctx.services.ds.query(`SELECT disabled FROM ${AGENDA_JOBS_TABLE} WHERE id = ?`, [id]))[0].disabled,
        ),
        1,
      );
      const deleted = await ctx.api
        .post('/admin/jobs/api/jobs/delete')
        .set('Authorization', ok)
        .send({ jobIds: [id] });
      assert.equal(deleted.status, 200, JSON.stringify(deleted.body));
      assert.equal((await ctx.services.ds.query(`SELECT id FROM ${AGENDA_JOBS_TABLE} WHERE id = ?`, [id])).length, 0);
    });

    it('refuses changes that are not JSON or come from another site, so a form elsewhere cannot forge them', async () => {
      await agendaQueueOf(ctx.services.jobs).schedule(new Date(Date.now() + 3_600_000), 'dash.example', {
        deploymentId: 'd-3',
      });
      const [row] = await ctx.services.ds.query(
        `SELECT id FROM ${AGENDA_JOBS_TABLE} WHERE name = 'dash.example' AND JSON_VALUE(data, '$.deploymentId') = 'd-3'`,
      );
      const id = String(row.id);
      const form = await ctx.api
        .post('/admin/jobs/api/jobs/delete')
        .set('Authorization', ok)
        .type('form')
        .send(`jobIds=${id}`);
      assert.equal(form.status, 403);
      assert.equal(form.body.error.code, 'FORBIDDEN');
      const cross = await ctx.api
        .post('/admin/jobs/api/jobs/delete')
        .set('Authorization', ok)
        .set('Sec-Fetch-Site', 'cross-site')
        .send({ jobIds: [id] });
      assert.equal(cross.status, 403);
      assert.equal(
        (await ctx.services.ds.query(`SELECT id FROM ${AGENDA_JOBS_TABLE} WHERE id = ?`, [id])).length,
        1,
        'nothing deleted',
      );
      const own = await ctx.api
        .post('/admin/jobs/api/jobs/delete')
        .set('Authorization', ok)
        .set('Sec-Fetch-Site', 'same-origin')
        .send({ jobIds: [id] });
      assert.equal(own.status, 200);
    });

    it('admits an admin OWNER key by bearer, and no other key', async () => {
      const admin = await key('OWNER', true);
      const owner = await key('OWNER', false);
      const agent = await key('AGENT', true);
      assert.equal((await ctx.api.get('/admin/jobs/api').set('Authorization', `Bearer ${admin}`)).status, 200);
      const denied = await ctx.api.get('/admin/jobs/api').set('Authorization', `Bearer ${owner}`);
      assert.equal(denied.status, 403);
      assert.equal(denied.body.error.code, 'FORBIDDEN');
      assert.equal((await ctx.api.get('/admin/jobs/api').set('Authorization', `Bearer ${agent}`)).status, 403);
      assert.equal((await ctx.api.get('/admin/jobs/api').set('Authorization', 'Bearer gpr_nope.nope')).status, 401);
    });
  });
});
