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
  const pair = ssh2.utils.generateKeyPairSync('ed25519', { comment });
  return { publicKey: pair.public.trim(), privateKey: pair.private };
}
