import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { lstat, mkdir, readdir, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { DataSource } from 'typeorm';
import { UID_MAX } from './sandbox.js';

/** Where services on this host record their sandbox uid blocks, unless LOCAL_PROVIDER_SANDBOX_UID_CLAIMS_DIR says otherwise. */
export const SANDBOX_UID_CLAIMS_DIR = '/run/gpu-rental/sandbox-uid-claims';

/** What one claim file holds: a running process of a service, and the uids it hands to machines. */
export interface UidClaimRecord {
  pid: number;
  /** The process's start time (`/proc/<pid>/stat`), so a pid reused by another process reads as gone. */
  started?: string;
  first: number;
  last: number;
  /** Which service the process belongs to (see {@link serviceIdentity}); processes of one service share a block. */
  service: string;
}

/** A claim this process holds; {@link UidClaim.release} removes it (idempotent). */
export interface UidClaim {
  readonly path: string;
  release(): Promise<void>;
}

/**
 * The service a process belongs to: the database its plugin state lives in, as `host:port/database`
 * (never the credentials). The api and worker processes of one deployment name the same database;
 * services with databases of their own differ, and must not share sandbox uids.
 */
export function serviceIdentity(ds: DataSource): string {
  const o = ds.options;
  const host = 'host' in o && o.host ? o.host.toLowerCase() : 'localhost';
  const port = 'port' in o && o.port ? o.port : 3306;
  return `${host}:${port}/${String(o.database ?? '')}`;
}

function startTimeOf(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 22 (starttime); the name in field 2 may hold spaces and parentheses, so count from its end.
    return stat
      .slice(stat.lastIndexOf(')') + 2)
      .split(' ')
      .at(19);
  } catch {
    return undefined;
  }
}

/** True while the claim's process runs; a process we may not signal (EPERM) runs too. */
function isLive(c: UidClaimRecord): boolean {
  try {
    process.kill(c.pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const started = startTimeOf(c.pid);
  return c.started === undefined || started === undefined || started === c.started;
}

function parseClaim(text: string): UidClaimRecord | undefined {
  try {
    const c = JSON.parse(text) as Partial<UidClaimRecord>;
    const whole = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= 0;
    if (!whole(c.pid) || !whole(c.first) || !whole(c.last) || typeof c.service !== 'string') return undefined;
    return { pid: c.pid, first: c.first, last: c.last, service: c.service, started: c.started };
  } catch {
    return undefined;
  }
}

/** Creates the directory 0700, and refuses one another user could write to: claims in it decide who may start. */
async function claimsDir(dir: string): Promise<void> {
  const where = `LOCAL_PROVIDER_SANDBOX_UID_CLAIMS_DIR (${dir})`;
  try {
    await mkdir(dir, { recursive: true, mode: 0o700 });
  } catch (err) {
    throw new Error(
      `${where} cannot be created (${(err as NodeJS.ErrnoException).code}); point it at a directory root can write`,
    );
  }
  const st = await lstat(dir);
  if (!st.isDirectory() || st.uid !== process.getuid?.() || (st.mode & 0o022) !== 0) {
    throw new Error(
      `${where} must be a directory of this service's user that no other user can write; fix it or point the variable elsewhere`,
    );
  }
}

/** Every claim in `dir` but `own`, removing those whose process is gone. */
async function liveClaims(dir: string, own: string): Promise<UidClaimRecord[]> {
  const live: UidClaimRecord[] = [];
  for (const name of await readdir(dir)) {
    if (name === own || name.startsWith('.') || !name.endsWith('.json')) continue;
    const text = await readFile(join(dir, name), 'utf8').catch(() => undefined);
    const claim = text === undefined ? undefined : parseClaim(text);
    if (!claim) continue;
    if (isLive(claim)) live.push(claim);
    else await unlink(join(dir, name)).catch(() => undefined);
  }
  return live;
}

function refusal(ours: UidClaimRecord, others: UidClaimRecord[], live: UidClaimRecord[]): string {
  const [other] = others;
  const count = ours.last - ours.first + 1;
  const free = Math.max(...live.map((c) => c.last)) + 1;
  const advice =
    free + count - 1 <= UID_MAX
      ? `set LOCAL_PROVIDER_SANDBOX_UID_FIRST=${free} and LOCAL_PROVIDER_SANDBOX_UID_COUNT=${count} (free: above every claimed block)`
      : 'set LOCAL_PROVIDER_SANDBOX_UID_FIRST and LOCAL_PROVIDER_SANDBOX_UID_COUNT to a block no other service claims';
  const more = others.length > 1 ? ` and ${others.length - 1} more` : '';
  return (
    `local provider: sandbox uids ${ours.first}-${ours.last} overlap uids ${other.first}-${other.last} of another service on this host ` +
    `(pid ${other.pid}, database ${other.service}${more}), and ending a machine kills every process of its uid; ${advice}`
  );
}

/**
 * Claims `first`-`last` for `service` in `dir`, or throws a one-line refusal when a running process
 * of another service claims an overlapping block. Ours is written (atomically) before the others are
 * read, so of two services starting at once at least one sees the other. Claims of processes that
 * are gone are removed; the claim of a process that dies without releasing it is such a claim.
 */
export async function claimSandboxUids(o: {
  dir: string;
  first: number;
  last: number;
  service: string;
}): Promise<UidClaim> {
  await claimsDir(o.dir);
  const ours: UidClaimRecord = {
    pid: process.pid,
    started: startTimeOf(process.pid),
    first: o.first,
    last: o.last,
    service: o.service,
  };
  const name = `${process.pid}-${randomBytes(6).toString('hex')}.json`;
  const path = join(o.dir, name);
  const temp = join(o.dir, `.${name}.tmp`);
  await writeFile(temp, `${JSON.stringify(ours)}\n`, { mode: 0o600, flag: 'wx' });
  await rename(temp, path);
  const release = () => unlink(path).catch(() => undefined);
  try {
    const live = await liveClaims(o.dir, name);
    const others = live
      .filter((c) => c.service !== o.service && c.first <= o.last && o.first <= c.last)
      .sort((a, b) => a.first - b.first);
    if (others.length > 0) throw new Error(refusal(ours, others, live));
  } catch (err) {
    await release();
    throw err;
  }
  return { path, release };
}
