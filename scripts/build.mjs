// `npm run build`: tsoa routes and OpenAPI document, then TypeScript to dist/, saying so as it goes.
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { STAMP } from './freshness.mjs';

const root = process.cwd();
const bin = (name) => join(root, 'node_modules', '.bin', name);

function step(line, cmd, args) {
  process.stderr.write(`${line}\n`);
  const r = spawnSync(cmd, args, { stdio: 'inherit', cwd: root });
  if (r.status !== 0) {
    process.stderr.write(`build failed at: ${cmd.split('/').pop()} ${args.join(' ')}\n`);
    process.exit(r.status ?? 1);
  }
}

const started = Date.now();
step('build: generating routes and the OpenAPI document (tsoa)...', bin('tsoa'), ['spec-and-routes']);
step('build: compiling TypeScript to dist/ (tsc)...', bin('tsc'), ['-p', 'tsconfig.build.json']);
mkdirSync(join(root, 'dist'), { recursive: true });
writeFileSync(join(root, STAMP), `${new Date().toISOString()}\n`);
process.stderr.write(`build: done in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
