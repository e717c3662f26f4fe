import { spawn } from 'node:child_process';
import {
  checkedId,
  checkedSshTarget,
  type Credentials,
  type GprClient,
  sshArgs,
  sshCommandLine,
  type SshKeyFiles,
  type SshTarget,
  writeSshKeyFiles,
} from '@gpu-rental/sdk';
import type { Command } from 'commander';
import type { Ctx } from '../context.js';
import { fields, UsageError } from '../output.js';

/**
 * Reveals the credentials of one rental and checks every field the service returned before any
 * of it names a file or reaches ssh; then saves the key (0600) under the config directory.
 */
async function revealChecked(
  client: GprClient,
  id: string,
  requireActive: boolean,
): Promise<{ target: SshTarget; files: SshKeyFiles; revealed: Credentials }> {
  const resolved = await client.resolve(id);
  const rentalId = checkedId('rentalId', resolved.rentalId);
  const deploymentId = checkedId('deploymentId', resolved.deploymentId);
  const { status } = resolved.rental;
  if (requireActive && status !== 'ACTIVE')
    throw new UsageError(`Rental ${rentalId} is ${String(status)}, not ACTIVE: wait with \`gpr status ${rentalId}\`.`);
  const revealed = await client.revealCredentials(deploymentId);
  const target = checkedSshTarget(revealed, deploymentId);
  return { target, files: writeSshKeyFiles(target, revealed.privateKey), revealed };
}

export function credentialCommands(program: Command, ctx: Ctx): void {
  program
    .command('creds <id>')
    .description(
      'Reveal the SSH credentials of an ACTIVE rental (audited; needs the `manage` scope): saves the key (0600) and prints it with the ssh command',
    )
    .action(async (id: string) => {
      const { target, files, revealed } = await revealChecked(ctx.client(), id, false);
      const sshCommand = sshCommandLine(target, files);
      // Only checked fields and commands built here: the service's own file name and command line are not passed on.
      const out = {
        ...target,
        keyFile: files.keyFile,
        knownHostsFile: files.knownHostsFile,
        sshCommand,
        privateKey: revealed.privateKey,
        publicKey: revealed.publicKey,
        revealedAt: revealed.revealedAt,
      };
      ctx.out(
        out,
        () =>
          fields([
            ['host', target.host],
            ['port', target.port],
            ['user', target.user],
            ['key file', files.keyFile],
            ['command', sshCommand],
          ]) + `\n${revealed.privateKey.trimEnd()}\n`,
      );
    });

  program
    .command('ssh <id> [command...]')
    .description('Open SSH to an ACTIVE rental with the system ssh; `gpr ssh <id> -- nvidia-smi` runs one command')
    .action(async (id: string, command: string[]) => {
      const { target, files } = await revealChecked(ctx.client(), id, true);
      const args = [
        // Without a terminal nobody can answer a password prompt; fail instead of hanging.
        ...sshArgs(target, files, { batch: !process.stdin.isTTY }),
        ...command,
      ];
      const code = await new Promise<number>((resolve, reject) => {
        const child = spawn(process.env.GPR_SSH_BIN || 'ssh', args, { stdio: 'inherit' });
        child.on('error', (err) =>
          reject(new UsageError(`Cannot run ssh (${(err as NodeJS.ErrnoException).code}): install an OpenSSH client.`)),
        );
        child.on('exit', (c2, signal) => resolve(c2 ?? (signal ? 128 : 1)));
      });
      process.exitCode = code;
    });
}
