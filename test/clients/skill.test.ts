import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { ROOT } from './helpers/build.js';

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
    assert.ok(fields.description.length > 0 && fields.description.length <= 1024, `description is ${fields.description.length} characters`);
    assert.match(fields.description, /\bUse when\b/, 'says when to use it');
    assert.ok(!fields.compatibility || fields.compatibility.length <= 500);
    assert.equal(metadata.version, JSON.parse(readFileSync(join(ROOT, 'clients/cli/package.json'), 'utf8')).version, 'released with the CLI version');
  });

  it('keeps the body under 500 lines, covers the flow, and links only to files it ships', () => {
    assert.ok(body.split('\n').length < 500);
    for (const topic of ['## The six-call flow', 'budgetRequired', '## Limits', '## How to wait', '## How to terminate', '## Gotchas']) {
      assert.ok(body.includes(topic), `covers ${topic}`);
    }
    assert.doesNotMatch(body, /gpr-mcp|MCP server/, 'does not require the MCP server');
    const links = [...body.matchAll(/\]\(([^)]+)\)/g)].map((m) => m[1]).filter((l) => !/^https?:/.test(l));
    assert.ok(links.length >= 3);
    for (const link of links) assert.ok(existsSync(join(SKILL_DIR, link)), `${link} exists`);
    const refs = readdirSync(join(SKILL_DIR, 'references'));
    for (const r of refs) assert.ok(links.includes(`references/${r}`), `references/${r} is linked from SKILL.md`);
    assert.equal(dirname(links[0]), 'references');
  });
});
