import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { configDir, type Credentials } from '@gpu-rental/sdk';
import type { Command } from 'commander';
import type { Ctx } from '../context.js';
import { fields, UsageError } from '../output.js';

/** Writes the private key (0600) and a known_hosts file of its own for one deployment. */
export function writeKeyFiles(c: Credentials): { keyFile: string; knownHosts: string } {
  const dir = join(configDir(), 'keys');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const keyFile = join(dir, `${c.deploymentId}.key`);
  writeFileSync(keyFile, c.privateKey.endsWith('\n') ? c.privateKey : `${c.privateKey}\n`, { mode: 0o600 });
  chmodSync(keyFile, 0o600);
  return { keyFile, knownHosts: join(dir, `${c.deploymentId}.known_hosts`) };
}

export function credentialCommands(program: Command, ctx: Ctx): void {
  program
    .command('creds <id>')
    .description('Reveal the SSH credentials of an ACTIVE rental (audited; includes the private key)')
    .action(async (id: string) => {
      const client = ctx.client();
      const { deploymentId } = await client.resolve(id);
      const c = await client.revealCredentials(deploymentId);
      ctx.out(c, () => fields([['host', c.host], ['port', c.port], ['user', c.user], ['command', c.sshCommand]]) + `\n${c.privateKey.trimEnd()}\n`);
    });

  program
    .command('ssh <id> [command...]')
    .description('Open SSH to an ACTIVE rental with the system ssh; `gpr ssh <id> -- nvidia-smi` runs one command')
    .action(async (id: string, command: string[]) => {
      const client = ctx.client();
      const { deploymentId, rental } = await client.resolve(id);
      if (rental.status !== 'ACTIVE') throw new UsageError(`Rental ${rental.rentalId} is ${rental.status}, not ACTIVE: wait with \`gpr status ${rental.rentalId}\`.`);
      const c = await client.revealCredentials(deploymentId);
      const { keyFile, knownHosts } = writeKeyFiles(c);
      const args = [
        '-i', keyFile,
        '-p', String(c.port),
        '-o', 'IdentitiesOnly=yes',
        '-o', 'StrictHostKeyChecking=accept-new',
        '-o', `UserKnownHostsFile=${knownHosts}`,
        '-o', 'LogLevel=ERROR',
        // Without a terminal nobody can answer a password prompt; fail instead of hanging.
        ...(process.stdin.isTTY ? [] : ['-o', 'BatchMode=yes']),
        `${c.user}@${c.host}`,
        ...command,
      ];
      const code = await new Promise<number>((resolve, reject) => {
        const child = spawn(process.env.GPR_SSH_BIN || 'ssh', args, { stdio: 'inherit' });
        child.on('error', (err) => reject(new UsageError(`Cannot run ssh (${(err as NodeJS.ErrnoException).code}): install an OpenSSH client.`)));
        child.on('exit', (c2, signal) => resolve(c2 ?? (signal ? 128 : 1)));
      });
      process.exitCode = code;
    });
}
