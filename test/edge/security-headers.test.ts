import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import supertest from 'supertest';
import { createApp } from '../../src/app.js';
import { createLogger } from '../../src/logger.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { signup } from '../helpers/factories.js';

/** The CSP's directives by name. */
function csp(res: supertest.Response): Map<string, string> {
  const header = String(res.headers['content-security-policy'] ?? '');
  return new Map(
    header
      .split(';')
      .map((d) => d.trim())
      .filter(Boolean)
      .map((d) => [d.split(/\s+/)[0], d] as [string, string]),
  );
}

describe('security headers and the bearer challenge', () => {
  let ctx: TestContext;
  let token: string;
  let ownerToken: string;
  before(async () => {
    ctx = await createTestContext({ env: { ADMIN_JOBS_USER: 'ops', ADMIN_JOBS_PASSWORD: 'correct horse' } });
    token = (await signup(ctx)).token;
    const owner = await ctx.services.accounts.findOrCreateTelegramOwner(Math.floor(Math.random() * 1e12), 42);
    ownerToken = (await ctx.services.accounts.issueOwnerKey(owner.id)).token;
  });
  after(() => ctx.close());

  it('sends nosniff on every response, JSON, HTML, text and errors alike', async () => {
    for (const path of [
      '/api/v1/gpus',
      '/docs',
      '/llms.txt',
      '/api/v1/me',
      '/nowhere',
      '/approve/gpa_unknown',
      '/healthz',
    ]) {
      const res = await ctx.api.get(path);
      assert.equal(res.headers['x-content-type-options'], 'nosniff', path);
    }
  });

  it('gives HTML a CSP without inline scripts and with frame-ancestors none, and the reference page still loads', async () => {
    const pages = [await ctx.api.get('/docs'), await ctx.api.get('/approve/gpa_unknown')];
    const authz = await ctx.api.post('/api/v1/agent-authorizations');
    pages.push(await ctx.api.get(new URL(authz.body.data.approvalUrl).pathname));
    for (const page of pages) {
      assert.match(page.headers['content-type'], /html/);
      const policy = csp(page);
      assert.equal(policy.get('frame-ancestors'), "frame-ancestors 'none'", page.text.slice(0, 80));
      assert.doesNotMatch(policy.get('script-src') ?? policy.get('default-src') ?? '', /unsafe-inline/);
      assert.equal(page.headers['x-frame-options'], 'DENY');
    }
    const docs = pages[0];
    assert.doesNotMatch(docs.text, /<script>/, 'no inline script on /docs');
    const init = await ctx.api.get('/docs/init.js');
    assert.equal(init.status, 200);
    assert.match(init.headers['content-type'], /javascript/);
    assert.match(init.text, /SwaggerUIBundle\(\{ url: '\/api\/openapi\.json'/);
  });

  it('keeps the jobs dashboard out of frames', async () => {
    const res = await ctx.api.get('/admin/jobs/').auth('ops', 'correct horse');
    assert.equal(res.status, 200);
    assert.equal(csp(res).get('frame-ancestors'), "frame-ancestors 'none'");
    assert.equal(res.headers['x-frame-options'], 'DENY');
  });

  it('marks every answer that carries a token, setup code or key Cache-Control: no-store', async () => {
    const s = await ctx.api.post('/api/v1/signup').set('Idempotency-Key', randomUUID()).send({});
    const authz = await ctx.api.post('/api/v1/agent-authorizations');
    const exchange = await ctx.api.post('/api/v1/agent-setups/exchange').send({ setupCode: authz.body.data.setupCode });
    const issued = await ctx.api
      .post('/api/v1/agent-keys')
      .set('Authorization', `Bearer ${ownerToken}`)
      .set('Idempotency-Key', randomUUID())
      .send({
        name: 'ci',
        scopes: ['read'],
        maxPerRentalMinor: 500,
        budgetLimitMinor: 500,
        maxConcurrentDeployments: 1,
      });
    const approve = await ctx.api
      .post('/api/v1/agent-authorizations/approve')
      .set('Authorization', `Bearer ${ownerToken}`)
      .send({
        approvalCode: new URL(authz.body.data.approvalUrl).pathname.split('/').pop(),
        maxPerRentalMinor: 500,
        budgetLimitMinor: 500,
        maxConcurrentDeployments: 1,
      });
    const me = await ctx.api.get('/api/v1/me').set('Authorization', `Bearer ${token}`);
    for (const [name, res, status] of [
      ['signup', s, 201],
      ['authorization', authz, 200],
      ['exchange', exchange, 409],
      ['agent key', issued, 201],
      ['approve', approve, 200],
      ['me', me, 200],
    ] as const) {
      assert.equal(res.status, status, `${name}: ${res.text}`);
      assert.equal(res.headers['cache-control'], 'no-store', name);
    }
    const gpus = await ctx.api.get('/api/v1/gpus');
    assert.notEqual(gpus.headers['cache-control'], 'no-store', 'public inventory stays cacheable with its ETag');
  });

  it('takes the bearer scheme in any case, and every 401 says WWW-Authenticate: Bearer with one body', async () => {
    for (const scheme of ['Bearer', 'bearer', 'BEARER', 'bEaReR']) {
      const res = await ctx.api.get('/api/v1/me').set('Authorization', `${scheme} ${token}`);
      assert.equal(res.status, 200, scheme);
    }
    const bodies = new Set<string>();
    for (const header of [undefined, 'Basic abc', 'Bearer', 'bearer gpr_nope.nope', `Bearer ${token}x`]) {
      const req = ctx.api.get('/api/v1/me');
      const res = await (header ? req.set('Authorization', header) : req);
      assert.equal(res.status, 401);
      assert.equal(res.headers['www-authenticate'], 'Bearer');
      bodies.add(JSON.stringify({ ...res.body.error, requestId: undefined }));
    }
    assert.equal(bodies.size, 1);
  });

  it('adds the challenge to a 401 from any route, keeping a scheme a route names itself', async () => {
    const api = supertest(
      createApp(ctx.services, {
        mount: (app) =>
          app.post('/hook', (_req, res) => void res.status(401).type('text').send('secret token is wrong')),
      }),
    );
    const hook = await api.post('/hook');
    assert.equal(hook.status, 401);
    assert.equal(hook.headers['www-authenticate'], 'Bearer');
    const dashboard = await ctx.api.get('/admin/jobs/');
    assert.equal(dashboard.status, 401);
    assert.equal(dashboard.headers['www-authenticate'], 'Basic realm="jobs", charset="UTF-8", Bearer');
  });

  it('never writes an approval code to the request log', async () => {
    const lines: string[] = [];
    const stream = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    const api = supertest(createApp({ ...ctx.services, logger: createLogger('info', stream) }));
    const authz = await api.post('/api/v1/agent-authorizations');
    const path = new URL(authz.body.data.approvalUrl).pathname;
    const code = path.split('/').pop()!;
    assert.equal((await api.get(path)).status, 200);
    assert.equal((await api.get(`${path}?x=1`)).status, 200);
    assert.equal((await api.get(`/approve/${code.slice(0, 20)}`)).status, 404);
    const log = lines.join('');
    assert.match(log, /"url":"\/approve\/\[redacted\]"/);
    assert.ok(!log.includes(code.slice(4, 24)), 'no part of the approval code is logged');
  });
});
