/*
 * Builds the client release: the CLI and MCP packages as `npm pack` tarballs (self-contained
 * bundles, no dependencies to fetch), the agent skill as a zip, `latest.json` and `SHA256SUMS`.
 *
 *   npm run release                         into releases/ (RELEASES_DIR)
 *   npm run release -- --out <dir>          elsewhere
 *   npm run release -- --if-missing         nothing when that version is already built (npm start runs this in the background)
 *   npm run release -- --base-url <url>     absolute artifact URLs (default: relative to latest.json)
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { zipSync } from 'fflate';
import { loadConfig } from '../src/config.js';
import {
  CHECKSUMS_FILE,
  MANIFEST_FILE,
  type ReleaseArtifact,
  type ReleaseManifest,
} from '../src/http/releases.router.js';
// @ts-expect-error plain ESM script without types
import { releaseIsBuilt } from './freshness.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SKILL_DIR = join(ROOT, 'clients/skill/gpu-rental');
const PACKAGES = [
  { name: 'cli', dir: 'clients/cli' },
  { name: 'mcp', dir: 'clients/mcp' },
];

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const readJson = (path: string) => JSON.parse(readFileSync(path, 'utf8'));

/** The one client version: every package and the skill's metadata must agree on it. */
function releaseVersion(): string {
  const versions = PACKAGES.map((p) => readJson(join(ROOT, p.dir, 'package.json')).version as string);
  const skill = /^\s+version:\s*"?([^"\n]+)"?\s*$/m.exec(readFileSync(join(SKILL_DIR, 'SKILL.md'), 'utf8'))?.[1];
  const all = new Set([...versions, skill]);
  if (all.size !== 1)
    throw new Error(`client versions disagree: cli ${versions[0]}, mcp ${versions[1]}, skill ${skill}`);
  return versions[0];
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? filesUnder(join(dir, e.name)) : [join(dir, e.name)]))
    .sort();
}

/** The skill folder as a zip whose bytes depend on the content only (fixed dates, sorted entries). */
function zipSkill(out: string, version: string): string {
  const file = `gpu-rental-skill-${version}.zip`;
  const entries: Record<string, [Uint8Array, { mtime: Date }]> = {};
  for (const path of filesUnder(SKILL_DIR)) {
    entries[`gpu-rental/${relative(SKILL_DIR, path).split('\\').join('/')}`] = [
      readFileSync(path),
      { mtime: new Date('2000-01-01T00:00:00Z') },
    ];
  }
  writeFileSync(join(out, file), zipSync(entries, { level: 9 }));
  return file;
}

function npmPack(dir: string, out: string): string {
  const res = execFileSync('npm', ['pack', '--json', '--pack-destination', out], {
    cwd: join(ROOT, dir),
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return (JSON.parse(res) as { filename: string }[])[0].filename;
}

function artifact(out: string, name: string, file: string, baseUrl: string | undefined): ReleaseArtifact {
  const bytes = readFileSync(join(out, file));
  return {
    name,
    file,
    url: baseUrl ? new URL(file, `${baseUrl.replace(/\/+$/, '')}/`).toString() : file,
    sha256: createHash('sha256').update(bytes).digest('hex'),
    size: statSync(join(out, file)).size,
  };
}

const out = resolve(arg('--out') ?? loadConfig().releases.dir);
const version = releaseVersion();
const manifestPath = join(out, MANIFEST_FILE);
if (process.argv.includes('--if-missing') && releaseIsBuilt(out, version)) {
  process.stdout.write(`client release ${version} already built in ${out}\n`);
  process.exit(0);
}

mkdirSync(out, { recursive: true });
execFileSync('npm', ['run', '--silent', 'build:clients'], { cwd: ROOT, stdio: 'inherit' });
const baseUrl = arg('--base-url');
const artifacts: Record<string, ReleaseArtifact> = {};
for (const p of PACKAGES) artifacts[p.name] = artifact(out, p.name, npmPack(p.dir, out), baseUrl);
artifacts.skill = artifact(out, 'skill', zipSkill(out, version), baseUrl);

const manifest: ReleaseManifest = { version, pub_date: new Date().toISOString(), artifacts };
writeFileSync(
  join(out, CHECKSUMS_FILE),
  Object.values(artifacts)
    .map((a) => `${a.sha256}  ${a.file}\n`)
    .join(''),
);
writeFileSync(manifestPath, `${JSON.stringify(manifest, null, 2)}\n`);
process.stdout.write(
  `client release ${version} in ${out}: ${Object.values(artifacts)
    .map((a) => a.file)
    .join(', ')}\n`,
);
