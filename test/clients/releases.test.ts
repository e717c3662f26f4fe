import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { unzipSync } from 'fflate';
import type { ReleaseManifest } from '../../src/http/releases.router.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { ROOT, underBuildLock } from './helpers/build.js';

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
// A release builds the clients again: not while another process of the run builds them.
const release = (...args: string[]) =>
  underBuildLock(() =>
    execFileSync('npm', ['run', '--silent', 'release', '--', ...args], {
      cwd: ROOT,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    }),
  );

describe('client releases (npm run release, served at RELEASES_URL)', function () {
  this.timeout(120_000);
  let dir: string;
  let ctx: TestContext;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gpr-releases-'));
    release('--out', dir);
    ctx = await createTestContext({ env: { RELEASES_DIR: dir } });
  });
  after(() => ctx?.close());

  /** Downloads a URL of the manifest from the app under test (PUBLIC_BASE_URL is http://gpu.test). */
  async function download(url: string): Promise<Buffer> {
    assert.ok(url.startsWith('http://gpu.test/releases/'), url);
    const res = await ctx.api
      .get(new URL(url).pathname)
      .buffer(true)
      .parse((r, cb) => {
        const chunks: Buffer[] = [];
        r.on('data', (c: Buffer) => chunks.push(c));
        r.on('end', () => cb(null, Buffer.concat(chunks)));
      });
    assert.equal(res.status, 200, url);
    return res.body as Buffer;
  }

  it('lists every artifact with a URL that downloads bytes of the stated sha256 and size; SHA256SUMS agrees', async () => {
    const res = await ctx.api.get('/releases/latest.json');
    assert.equal(res.status, 200);
    const m = res.body as ReleaseManifest;
    assert.equal(m.version, JSON.parse(readFileSync(join(ROOT, 'clients/cli/package.json'), 'utf8')).version);
    assert.ok(!Number.isNaN(Date.parse(m.pub_date)));
    assert.deepEqual(Object.keys(m.artifacts).sort(), ['cli', 'mcp', 'skill']);
    const sums = (await download('http://gpu.test/releases/SHA256SUMS')).toString();
    for (const a of Object.values(m.artifacts)) {
      const bytes = await download(a.url);
      assert.equal(bytes.length, a.size, a.file);
      assert.equal(sha256(bytes), a.sha256, a.file);
      assert.ok(sums.includes(`${a.sha256}  ${a.file}\n`), a.file);
    }
    const skill = unzipSync(await download(m.artifacts.skill.url));
    const fill = (text: string) =>
      text.replaceAll('{base_url}', 'http://gpu.test').replaceAll('{releases_url}', 'http://gpu.test/releases');
    assert.equal(
      Buffer.from(skill['gpu-rental/SKILL.md']).toString(),
      fill(readFileSync(join(ROOT, 'clients/skill/gpu-rental/SKILL.md'), 'utf8')),
    );
    assert.deepEqual(Object.keys(skill).sort(), [
      'gpu-rental/SKILL.md',
      'gpu-rental/references/cli.md',
      'gpu-rental/references/errors.md',
      'gpu-rental/references/http-api.md',
    ]);
    assert.equal((await ctx.api.get('/releases/package.json')).status, 404, 'only listed files are served');
    assert.equal((await ctx.api.get('/releases/..%2Fpackage.json')).status, 404);
  });

  it("serves the skill with its placeholders filled with this service's addresses (a template nowhere else)", async () => {
    const m = (await ctx.api.get('/releases/latest.json')).body as ReleaseManifest;
    const files = Object.entries(unzipSync(await download(m.artifacts.skill.url))).map(
      ([name, bytes]) => [name, Buffer.from(bytes).toString()] as const,
    );
    for (const [name, text] of files)
      assert.doesNotMatch(text, /\{base_url\}|\{releases_url\}|<service>/, `${name} has a placeholder left`);
    const all = files.map(([, text]) => text).join('\n');
    assert.ok(all.includes('`http://gpu.test/api/openapi.json`'), 'the contract at this service');
    assert.ok(all.includes('http://gpu.test/releases/latest.json'), "the CLI from this service's releases");
    assert.ok(all.includes('export GPR_BASE_URL=http://gpu.test'), 'gpr pointed at this service');
    // The sources stay templates: the zip as built and any copy hosted elsewhere keep the placeholders.
    const built = unzipSync(readFileSync(join(dir, m.artifacts.skill.file)));
    assert.match(Buffer.from(built['gpu-rental/SKILL.md']).toString(), /\{base_url\}\/api\/openapi\.json/);
  });

  it('the CLI and MCP tarballs install into a scratch prefix (no registry needed) and print the manifest version', async () => {
    const m = (await ctx.api.get('/releases/latest.json')).body as ReleaseManifest;
    const scratch = mkdtempSync(join(tmpdir(), 'gpr-install-'));
    const files = await Promise.all(
      (['cli', 'mcp'] as const).map(async (k) => {
        const path = join(scratch, m.artifacts[k].file);
        writeFileSync(path, await download(m.artifacts[k].url));
        return path;
      }),
    );
    const prefix = join(scratch, 'prefix');
    execFileSync('npm', ['install', '-g', '--offline', '--no-audit', '--no-fund', '--prefix', prefix, ...files], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    assert.equal(execFileSync(join(prefix, 'bin', 'gpr'), ['--version'], { encoding: 'utf8' }).trim(), m.version);
    assert.equal(execFileSync(join(prefix, 'bin', 'gpr-mcp'), ['--version'], { encoding: 'utf8' }).trim(), m.version);
    // Installed from this service, both call it by default (nothing here connects: the MCP server reaches out only on a tool call).
    const env = { PATH: process.env.PATH ?? '', XDG_CONFIG_HOME: mkdtempSync(join(tmpdir(), 'gpr-installed-')) };
    const help = (extra: Record<string, string> = {}) =>
      execFileSync(join(prefix, 'bin', 'gpr'), ['--help'], { encoding: 'utf8', env: { ...env, ...extra } }).replace(
        /\s+/g,
        ' ',
      );
    assert.match(
      help(),
      /default: GPR_BASE_URL, the config file, http:\/\/gpu\.test, the service this copy came from\)/,
    );
    const mcp = spawnSync(join(prefix, 'bin', 'gpr-mcp'), [], { encoding: 'utf8', env, input: '', timeout: 30_000 });
    assert.match(mcp.stderr, /gpr-mcp: serving http:\/\/gpu\.test \(/);
  });

  it('--if-missing keeps a built release; nothing is served when RELEASES_URL is elsewhere or nothing is built', async () => {
    const before = readFileSync(join(dir, 'latest.json'), 'utf8');
    assert.match(release('--out', dir, '--if-missing'), /already built/);
    assert.equal(readFileSync(join(dir, 'latest.json'), 'utf8'), before);

    const elsewhere = await createTestContext({
      env: { RELEASES_DIR: dir, RELEASES_URL: 'https://downloads.example.com/gpr' },
    });
    try {
      assert.equal(elsewhere.config.releases.url, 'https://downloads.example.com/gpr');
      assert.equal((await elsewhere.api.get('/releases/latest.json')).status, 404);
    } finally {
      await elsewhere.close();
    }
    const empty = await createTestContext({ env: { RELEASES_DIR: mkdtempSync(join(tmpdir(), 'gpr-none-')) } });
    try {
      const res = await empty.api.get('/releases/latest.json');
      assert.equal(res.status, 404);
      assert.equal(res.body.error.code, 'NOT_FOUND');
      assert.match(res.body.error.requestId, /^req_/);
    } finally {
      await empty.close();
    }
  });
});
