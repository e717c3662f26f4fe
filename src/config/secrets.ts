import { createHash } from 'node:crypto';
import { ConfigError, opt, str, type Env } from '../config-values.js';
import { parseKeyList } from '../modules/credentials/secret-box.js';

/** The keys that seal and open secrets at rest. */
export interface SecretsConfig {
  /** Key-encryption key for secrets at rest (AES-256-GCM); 32 bytes (SECRETS_KEY). */
  key: Buffer;
  /** Id stored next to each sealed secret (SECRETS_KEY_ID). */
  keyId: string;
  /** `key` is the fixed, public development key: SECRETS_KEY was not set. */
  generated: boolean;
  /** Keys of earlier rotations (SECRETS_KEY_PREVIOUS), by id: they open what they sealed and never seal. */
  previous: { id: string; key: Buffer }[];
}

/** SECRETS_KEY, SECRETS_KEY_ID and SECRETS_KEY_PREVIOUS; production refuses to run on the development key. */
export function readSecrets(env: Env, nodeEnv: string): SecretsConfig {
  const raw = opt(env, 'SECRETS_KEY', { secret: true });
  let current: Omit<SecretsConfig, 'previous'>;
  if (!raw) {
    if (nodeEnv === 'production') throw new ConfigError('SECRETS_KEY is required in production (32 bytes, base64)');
    // A fixed, public development key: every process of a dev setup (api and worker apart) can
    // open what another sealed, across restarts. It protects nothing, hence production refuses it.
    current = {
      key: createHash('sha256').update('gpu-rental development secrets key').digest(),
      keyId: 'dev',
      generated: true,
    };
  } else {
    const key = Buffer.from(raw, 'base64');
    if (key.length !== 32) throw new ConfigError('SECRETS_KEY must be 32 bytes encoded as base64');
    current = { key, keyId: str(env, 'SECRETS_KEY_ID', 'k1'), generated: false };
  }
  let previous: SecretsConfig['previous'];
  try {
    previous = parseKeyList(opt(env, 'SECRETS_KEY_PREVIOUS') ?? '', current.keyId);
  } catch (err) {
    throw new ConfigError(`SECRETS_KEY_PREVIOUS ${(err as Error).message}`);
  }
  return { ...current, previous };
}
