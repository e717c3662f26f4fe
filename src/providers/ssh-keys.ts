import ssh2 from 'ssh2';

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
  if (!/^[\x21-\x7e]{1,100}$/.test(comment)) throw new Error('SSH key comment must be 1-100 printable ASCII characters without spaces');
  // ssh2 occasionally (about 3 in 1000) writes an ed25519 private key its own parser rejects as
  // "Malformed OpenSSH private key"; such a key could never log in, so draw again.
  for (let i = 0; ; i++) {
    const pair = ssh2.utils.generateKeyPairSync('ed25519', { comment });
    if (!(ssh2.utils.parseKey(pair.private) instanceof Error) || i >= 20) return { publicKey: pair.public.trim(), privateKey: pair.private };
  }
}
