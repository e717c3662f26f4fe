import {
  checkedId,
  checkedSshTarget,
  GprUnsafeValueError,
  type SshKeyFiles,
  type SshTarget,
  sshCommandLine,
} from '@gpu-rental/sdk';
import { z } from 'zod';
import { keyRefusal, success } from './guard.js';
import { type RentalTarget, targetId, targetRefusal } from './rental-steps.js';
import * as s from './schemas.js';
import { defineTool, type ToolDeps } from './tool.js';

// SSH access to a running machine.

/** The longest private key a service sends, as the SDK's key files take it. */
const MAX_KEY_CHARS = 16_384;

/** The key text of a reveal, checked as a key file would check it before it reaches the model. */
function usableKey(privateKey: unknown): string {
  if (
    typeof privateKey !== 'string' ||
    privateKey.length === 0 ||
    privateKey.length > MAX_KEY_CHARS ||
    privateKey.includes('\0')
  ) {
    throw new GprUnsafeValueError('privateKey', 'The service returned no usable private key; nothing was revealed.');
  }
  return privateKey;
}

/**
 * Where sshCommand reads the key and known hosts when this server saves no files: beside the
 * caller's shell, named by the checked deployment id alone.
 */
const callerFiles = (target: SshTarget): SshKeyFiles => ({
  keyFile: `./gpr-${target.deploymentId}.key`,
  knownHostsFile: `./gpr-${target.deploymentId}.known_hosts`,
});

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
  outputSchema: {
    credentials: s.credentials,
    next: z.string().optional().describe('when this server saved no key file: how to get the key and where to save it'),
  },
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true },
  guarded: 'reveals',
  keyInResult: (a) => a.includePrivateKey === true,
  run: async (a: RentalTarget & { includePrivateKey?: boolean }, deps) => {
    if (a.includePrivateKey && !deps.allowSecrets) return keyRefusal(deps.saveKeyFiles !== undefined);
    const id = targetId(a);
    if (id === null) return targetRefusal('reveal_ssh_credentials');
    const client = deps.client();
    const resolved = await client.resolve(id);
    checkedId('rentalId', resolved.rentalId);
    const deploymentId = checkedId('deploymentId', resolved.deploymentId);
    const revealed = await client.revealCredentials(deploymentId);
    // Only checked fields and paths built here reach the model: not the service's file name or command line.
    const target = checkedSshTarget(revealed, deploymentId);
    if (!deps.saveKeyFiles)
      return success(forTheCaller(target, revealed.privateKey, a.includePrivateKey === true, deps));
    const files = deps.saveKeyFiles(target, revealed.privateKey);
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

/**
 * SSH access from a server with no disk of the caller's: the same checked target and command,
 * reading a key file the caller saves; the key itself only when asked for (and allowed, which
 * the tool checked first).
 */
function forTheCaller(
  target: SshTarget,
  privateKey: unknown,
  includePrivateKey: boolean,
  deps: ToolDeps,
): Record<string, unknown> {
  const files = callerFiles(target);
  const credentials = {
    ...target,
    ...files,
    keyFileSaved: false,
    sshCommand: sshCommandLine(target, files, { batch: true }),
    ...(includePrivateKey ? { privateKey: usableKey(privateKey) } : {}),
  };
  const next = includePrivateKey
    ? `Save privateKey to ${files.keyFile} with mode 0600 (write it under umask 077, or chmod 600 it before use; it is a secret: never print or log it), then run sshCommand in that directory.`
    : deps.allowSecrets
      ? `No key was sent: call reveal_ssh_credentials again with includePrivateKey: true to receive the private key, save it to ${files.keyFile} with mode 0600, then run sshCommand in that directory.`
      : 'No key was sent, and this connection does not pass private keys into the conversation: ask a human to connect with `gpr ssh <rentalId>`.';
  return { credentials, next };
}
