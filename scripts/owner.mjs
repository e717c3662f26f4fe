// `npm run owner -- <args>`: the operator command (src/cli/owner-command.ts) after generating the
// routes it imports. npm prints its banner on stdout unless run with --silent, so a --json run
// that would put it before the JSON is refused before anything is created: the key it would
// print exists once, and a pipe into jq that fails on the banner would lose it.
import { spawnSync } from 'node:child_process';

const args = process.argv.slice(2);
const quote = (a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`);
if (
  args.includes('--json') &&
  process.env.npm_lifecycle_event === 'owner' &&
  process.env.npm_config_loglevel !== 'silent'
) {
  process.stderr.write(
    `owner: npm printed its banner on stdout, so --json would not print JSON alone; nothing was created. ` +
      `Run: npm run --silent owner -- ${args.map(quote).join(' ')}\n`,
  );
  process.exit(2);
}
// Whatever generation prints goes to stderr: stdout is the command's own output.
const gen = spawnSync('npm', ['run', '--silent', 'generate'], { stdio: ['ignore', 2, 2] });
if (gen.status !== 0) process.exit(gen.status ?? 1);
const r = spawnSync(process.execPath, ['--import', 'tsx', 'src/main.ts', 'owner', ...args], { stdio: 'inherit' });
process.exit(r.status ?? 1);
