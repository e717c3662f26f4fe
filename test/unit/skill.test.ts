import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  ACTIVE_MEANS,
  LEASE_RULE,
  MACHINE_SETTINGS_RULE,
  PHASES_RULE,
  WAIT_FOR_CAPACITY_RULE,
} from '../../src/vocabulary/machine-hints.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SKILL_DIR = join(ROOT, 'clients/skill/gpu-rental');
const ALLOWED_KEYS = new Set(['name', 'description', 'license', 'compatibility', 'metadata', 'allowed-tools']);

/** The front matter as the Agent Skills format defines it: a YAML map of scalars, metadata a map of strings. */
function frontMatter(text: string): { fields: Record<string, string>; metadata: Record<string, string>; body: string } {
  const m = /^---\n([\s\S]*?)\n---\n([\s\S]*)$/.exec(text);
  assert.ok(m, 'SKILL.md starts with --- front matter ---');
  const fields: Record<string, string> = {};
  const metadata: Record<string, string> = {};
  let inMetadata = false;
  for (const line of m[1].split('\n')) {
    const nested = /^ {2}([A-Za-z0-9_-]+):\s*"?([^"]*)"?$/.exec(line);
    if (inMetadata && nested) {
      metadata[nested[1]] = nested[2];
      continue;
    }
    const top = /^([a-z-]+):\s*(.*)$/.exec(line);
    assert.ok(top, `front matter line is "key: value": ${line}`);
    inMetadata = top[1] === 'metadata' && top[2] === '';
    fields[top[1]] = top[2];
  }
  return { fields, metadata, body: m[2] };
}

describe('gpu-rental agent skill', () => {
  const text = readFileSync(join(SKILL_DIR, 'SKILL.md'), 'utf8');
  const { fields, metadata, body } = frontMatter(text);

  it('has front matter per the Agent Skills format', () => {
    for (const key of Object.keys(fields)) assert.ok(ALLOWED_KEYS.has(key), `unknown front matter key ${key}`);
    assert.equal(fields.name, basename(SKILL_DIR), 'name is the folder name');
    assert.match(fields.name, /^[a-z0-9]+(-[a-z0-9]+)*$/, 'lowercase letters, digits and single hyphens');
    assert.ok(fields.name.length <= 64);
    assert.ok(
      fields.description.length > 0 && fields.description.length <= 1024,
      `description is ${fields.description.length} characters`,
    );
    assert.match(fields.description, /\bUse when\b/, 'says when to use it');
    assert.ok(!fields.compatibility || fields.compatibility.length <= 500);
    assert.equal(
      metadata.version,
      JSON.parse(readFileSync(join(ROOT, 'clients/cli/package.json'), 'utf8')).version,
      'released with the CLI version',
    );
  });

  it('keeps the body under 500 lines, covers the flow, and links only to files it ships', () => {
    assert.ok(body.split('\n').length < 500);
    for (const topic of [
      '## The six-call flow',
      'budgetRequired',
      '## Limits',
      '## How to wait',
      '## How to terminate',
      '## Gotchas',
    ]) {
      assert.ok(body.includes(topic), `covers ${topic}`);
    }
    assert.doesNotMatch(body, /gpr-mcp|MCP server/, 'does not require the MCP server');
    assert.match(fields.description, /remote MCP endpoint/, 'says it works as a remote MCP connection too');
    const remote = /^- \*\*Remote MCP\*\*[^\n]*(?:\n {2}[^\n]*)*/m.exec(body)?.[0] ?? '';
    assert.ok(remote.includes('`{base_url}/mcp`'), 'names the URL to add, filled in when served');
    for (const point of ['OAuth', 'owner', 'includePrivateKey'])
      assert.ok(remote.includes(point), `the remote MCP way says ${point}`);
    const links = [...body.matchAll(/\]\(([^)]+)\)/g)].map((m) => m[1]).filter((l) => !/^https?:/.test(l));
    assert.ok(links.length >= 3);
    for (const link of links) assert.ok(existsSync(join(SKILL_DIR, link)), `${link} exists`);
    const refs = readdirSync(join(SKILL_DIR, 'references'));
    for (const r of refs) assert.ok(links.includes(`references/${r}`), `references/${r} is linked from SKILL.md`);
    assert.equal(dirname(links[0]), 'references');
  });

  it('documents machine settings with a worked example, leases, waiting for capacity, phases and what ACTIVE means, in the words the API uses', () => {
    const flat = body.replace(/\s+/g, ' ');
    for (const rule of [MACHINE_SETTINGS_RULE, LEASE_RULE, WAIT_FOR_CAPACITY_RULE, ACTIVE_MEANS, PHASES_RULE])
      assert.ok(flat.includes(rule), rule.slice(0, 60));
    assert.ok(body.includes('## Machine settings, leases and waiting for capacity'));
    const example = /```sh\n([\s\S]*?--ttl 2h[\s\S]*?)```/.exec(body)?.[1] ?? '';
    for (const flag of ['--image ', '--env ', '--script ', '--port ', '--ttl ', '--wait'])
      assert.ok(example.includes(flag), `the worked example uses ${flag}`);
    const http = /```json\n([\s\S]*?)```/.exec(body)?.[1] ?? '';
    const parsed = JSON.parse(http.replace('"hf_..."', '"hf_x"'));
    assert.deepEqual(Object.keys(parsed.machine).sort(), ['env', 'image', 'ports', 'startupScript']);
    assert.equal(parsed.terminateAfterSeconds, 7200);
    const cli = readFileSync(join(SKILL_DIR, 'references/cli.md'), 'utf8');
    for (const flag of [
      '--image',
      '--env NAME=VALUE',
      '--env-from',
      '--script',
      '--port',
      '--disk',
      '--ttl',
      '--wait-capacity',
      'gpr wait',
    ])
      assert.ok(cli.includes(flag), `cli.md: ${flag}`);
    const errors = readFileSync(join(SKILL_DIR, 'references/errors.md'), 'utf8');
    for (const code of ['GPU_MISMATCH', 'NO_CAPACITY', 'maxRentalSeconds', 'machine.*'])
      assert.ok(errors.includes(code), `errors.md: ${code}`);
  });
});
