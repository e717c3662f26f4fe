import { createRequire } from 'node:module';
import type Ssh2 from 'ssh2';

/**
 * ssh2, loaded on first use: it holds a 16 MB WebAssembly memory for its ciphers from the moment
 * it loads, which processes that never make a key (the api role) should not carry. A plain
 * require, so key generation stays synchronous; Node caches the module after the first call.
 */
export const loadSsh2 = (): typeof Ssh2 => createRequire(import.meta.url)('ssh2') as typeof Ssh2;

/** A deployment's SSH identity: the public half goes to the provider, the private half to the customer. */
export interface DeploymentKeyPair {
  /** One OpenSSH `authorized_keys` line: `ssh-ed25519 AAAA... <comment>`. */
  publicKey: string;
  /**
   * Unencrypted OpenSSH private key (`-----BEGIN OPENSSH PRIVATE KEY-----`), the format the `ssh`
   * CLI, ssh2 and node-ssh all read. A secret: encrypt at rest and never log it.
   */
  privateKey: string;
}

/**
 * Generates a fresh ed25519 key pair for one deployment. `comment` ends up in the public key
 * (and so at the provider); keep it free of customer data, e.g. `gpu-rental-<deploymentId>`.
 */
export function generateDeploymentKeyPair(comment = 'gpu-rental'): DeploymentKeyPair {
  if (!/^[\x21-\x7e]{1,100}$/.test(comment))
    throw new Error('SSH key comment must be 1-100 printable ASCII characters without spaces');
  // ssh2 occasionally (about 3 in 1000) writes an ed25519 private key its own parser rejects as
  // "Malformed OpenSSH private key"; such a key could never log in, so draw again.
  const ssh2 = loadSsh2();
  for (let i = 0; ; i++) {
    const pair = ssh2.utils.generateKeyPairSync('ed25519', { comment });
    if (!(ssh2.utils.parseKey(pair.private) instanceof Error) || i >= 20)
      return { publicKey: pair.public.trim(), privateKey: pair.private };
  }
}
