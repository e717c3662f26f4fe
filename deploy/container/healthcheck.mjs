// The container's HEALTHCHECK. It reads the service's roles from its arguments: with the api role,
// /healthz must answer 200; without it the process has no port, and being alive is the check.
// The service is PID 1, or PID 1's child when an init runs first (`docker run --init`); an
// argument names another PID (running this outside a container).
import { readdirSync, readFileSync } from 'node:fs';

const ENTRY = 'dist/src/main.js';

function argvOf(pid) {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  } catch {
    return undefined;
  }
}

function parentOf(pid) {
  try {
    // The command name in field 2 may hold spaces and parentheses: fields after its last ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  }
}

function serviceArgs() {
  const root = Number(process.argv[2] ?? 1);
  const candidates = [
    root,
    ...readdirSync('/proc')
      .filter((d) => /^\d+$/.test(d))
      .map(Number)
      .filter((pid) => parentOf(pid) === root),
  ];
  for (const pid of candidates) {
    const argv = argvOf(pid);
    const at = argv?.findIndex((a) => a.endsWith(ENTRY)) ?? -1;
    if (at >= 0) return argv.slice(at + 1);
  }
  return undefined;
}

const args = serviceArgs();
if (!args) process.exit(1);
const eq = args.find((a) => a.startsWith('--role='));
const i = args.indexOf('--role');
const roles = (eq ? eq.slice('--role='.length) : i >= 0 ? (args[i + 1] ?? '') : 'api').split(',');
if (!roles.includes('api')) process.exit(0);

const host =
  !process.env.HOST || process.env.HOST === '0.0.0.0' || process.env.HOST === '::' ? '127.0.0.1' : process.env.HOST;
const url = `http://${host.includes(':') ? `[${host}]` : host}:${process.env.PORT || 8080}/healthz`;
try {
  const res = await fetch(url, { signal: AbortSignal.timeout(4000) });
  process.exit(res.status === 200 ? 0 : 1);
} catch {
  process.exit(1);
}
