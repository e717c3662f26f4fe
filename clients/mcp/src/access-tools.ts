import { checkedId, checkedSshTarget, sshCommandLine, writeSshKeyFiles } from '@gpu-rental/sdk';
import { z } from 'zod';
import { keyRefusal, success } from './guard.js';
import { type RentalTarget, targetId, targetRefusal } from './rental-steps.js';
import * as s from './schemas.js';
import { defineTool } from './tool.js';

// SSH access to a running machine.

export const revealSshCredentials = defineTool({
  name: 'reveal_ssh_credentials',
  title: 'Reveal SSH credentials',
  description:
    'SSH access to an ACTIVE rental: host, port, user, keyFile (the private key saved by this server with mode 0600) and sshCommand, ready to run in a shell ' +
    '(append a remote command, e.g. `nvidia-smi`). The key itself is not returned: use keyFile. Each call is audited; the API key needs the `manage` scope. ' +
    'Needs a server started with GPR_MCP_ALLOW_SPEND=1; includePrivateKey also needs GPR_MCP_ALLOW_SECRETS=1. When refused, ask a human to connect with `gpr ssh <rentalId>`.',
  inputSchema: {
    ...s.rentalTarget,
    includePrivateKey: z
      .boolean()
      .optional()
      .describe(
        'also return the private key text (a secret: never print or log it); refused unless the server has GPR_MCP_ALLOW_SECRETS=1. Prefer keyFile.',
      ),
  },
  outputSchema: { credentials: s.credentials },
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true },
  guarded: 'reveals',
  keyInResult: (a) => a.includePrivateKey === true,
  run: async (a: RentalTarget & { includePrivateKey?: boolean }, deps) => {
    if (a.includePrivateKey && !deps.allowSecrets) return keyRefusal();
    const id = targetId(a);
    if (id === null) return targetRefusal('reveal_ssh_credentials');
    const client = deps.client();
    const resolved = await client.resolve(id);
    checkedId('rentalId', resolved.rentalId);
    const deploymentId = checkedId('deploymentId', resolved.deploymentId);
    const revealed = await client.revealCredentials(deploymentId);
    // Only checked fields and paths built here reach the model: not the service's file name or command line.
    const target = checkedSshTarget(revealed, deploymentId);
    const files = writeSshKeyFiles(target, revealed.privateKey);
    const credentials = {
      ...target,
      keyFile: files.keyFile,
      knownHostsFile: files.knownHostsFile,
      // A model's shell has no terminal to answer a password prompt: fail instead of hanging.
      sshCommand: sshCommandLine(target, files, { batch: true }),
      ...(a.includePrivateKey ? { privateKey: revealed.privateKey } : {}),
    };
    return success({ credentials });
  },
});
