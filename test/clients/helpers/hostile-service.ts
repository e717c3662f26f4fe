import { chmodSync, lstatSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const GOOD_RENTAL_ID = '0b7c56d2-3f5e-4a41-9d0e-6c1f2a3b4c5d';
export const GOOD_DEPLOYMENT_ID = '5e1d9c8b-7a6f-4e3d-8c2b-1a0f9e8d7c6b';
export const FAKE_PRIVATE_KEY =
  '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAAfake\n-----END OPENSSH PRIVATE KEY-----\n';

/** What the fake service answers: the rental (by any id) and the credentials reveal. */
export interface HostileAnswers {
  rental: { rentalId: unknown; deploymentId: unknown; status?: string };
  credentials: { deploymentId: unknown; host: unknown; port: unknown; user: unknown; privateKey?: unknown };
}

export const goodAnswers = (): HostileAnswers => ({
  rental: { rentalId: GOOD_RENTAL_ID, deploymentId: GOOD_DEPLOYMENT_ID },
  credentials: { deploymentId: GOOD_DEPLOYMENT_ID, host: '203.0.113.10', port: 22, user: 'root' },
});

/**
 * A compromised service in miniature: it answers the rental lookup and the credentials reveal
 * with whatever the test sets, as a real service's JSON envelope, and records every request.
 */
export class HostileService {
  answers: HostileAnswers = goodAnswers();
  readonly requests: string[] = [];
  private server?: Server;
  baseUrl = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      this.requests.push(`${req.method} ${req.url}`);
      const send = (status: number, body: unknown) => {
        res.writeHead(status, { 'Content-Type': 'application/json', 'X-Request-Id': 'req_hostile' });
        res.end(JSON.stringify(body));
      };
      const url = req.url ?? '';
      const { rental, credentials } = this.answers;
      if (req.method === 'GET' && /^\/api\/v1\/rentals\/[^/?]+$/.test(url)) {
        return send(200, {
          data: {
            status: 'ACTIVE',
            billingModel: 'PREPAID',
            quote: { hourlyPriceMinor: 299, totalMinor: 299, currency: 'USD' },
            createdAt: new Date().toISOString(),
            endedAt: null,
            ...rental,
          },
        });
      }
      if (req.method === 'POST' && /^\/api\/v1\/deployments\/[^/?]+\/credentials\/reveal$/.test(url)) {
        return send(200, {
          data: {
            privateKey: FAKE_PRIVATE_KEY,
            publicKey: 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA fake',
            privateKeyFile: '../../../.bashrc',
            sshCommand: `ssh -i key -p ${String(credentials.port)} ${String(credentials.user)}@${String(credentials.host)}`,
            revealedAt: new Date().toISOString(),
            ...credentials,
          },
        });
      }
      send(404, { error: { code: 'NOT_FOUND', message: 'no such thing here', requestId: 'req_hostile' } });
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    this.baseUrl = `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
  }

  async stop(): Promise<void> {
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}

/** Every file (not directory) under `root`, as paths relative to it; symlinks are listed, not followed. */
export function filesUnder(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string, prefix: string) => {
    for (const name of readdirSync(dir)) {
      const rel = prefix ? `${prefix}/${name}` : name;
      if (lstatSync(join(dir, name)).isDirectory()) walk(join(dir, name), rel);
      else out.push(rel);
    }
  };
  walk(root, '');
  return out.sort();
}

/**
 * A stand-in for `ssh` that records its arguments, one a line, in `argv` next to it and exits 0:
 * the test sees exactly what would have reached ssh, or that nothing did.
 */
export function recordingSsh(): { bin: string; argvFile: string } {
  const dir = mkdtempSync(join(tmpdir(), 'gpr-fake-ssh-'));
  const bin = join(dir, 'ssh');
  const argvFile = join(dir, 'argv');
  writeFileSync(bin, `#!/bin/sh\nfor a in "$@"; do printf '%s\\n' "$a"; done > '${argvFile}'\nexit 0\n`);
  chmodSync(bin, 0o755);
  return { bin, argvFile };
}
