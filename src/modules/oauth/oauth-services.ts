import type { Clock } from '../../clock.js';
import type { Config } from '../../config.js';
import type { Logger } from '../../logger.js';
import type { SecretBox } from '../credentials/secret-box.js';
import type { KeysService } from '../keys/keys.service.js';
import { AuthorizationServer } from './authorization-server.js';
import { METADATA_LIMITS } from './client-metadata.js';
import type { OAuthStore } from './oauth-adapter.js';

/** The authorization server of a process, on the process's store and keys, configured from `config`. */
export function createAuthorizationServer(deps: {
  config: Config;
  store: OAuthStore;
  box: SecretBox;
  clock: Clock;
  keys: KeysService;
  logger: Logger;
  /** Certificates TLS trusts for client metadata documents instead of the system's (tests). */
  metadataCa?: string;
}): AuthorizationServer {
  const { config, keys } = deps;
  return new AuthorizationServer({
    store: deps.store,
    box: deps.box,
    clock: deps.clock,
    log: deps.logger.child({ component: 'oauth' }),
    keys: {
      activeAgentKey: async (keyId) => {
        const p = await keys.agentPrincipal(keyId);
        return p && { keyId: p.keyId, accountId: p.accountId, scopes: p.scopes };
      },
    },
    publicBaseUrl: config.http.publicBaseUrl,
    secretsKey: config.secrets.key,
    behindProxy: config.http.trustProxy !== false,
    metadata: {
      allowPrivate: config.webhooks.allowPrivateDestinations,
      limits: METADATA_LIMITS,
      ...(deps.metadataCa ? { ca: deps.metadataCa } : {}),
    },
  });
}
