import type { ApiKey, KeyKind, Scope } from '../modules/keys/api-key.entity.js';

/** The authenticated caller: one API key of one account. */
export interface Principal {
  keyId: string;
  accountId: string;
  kind: KeyKind;
  scopes: Scope[];
  key: ApiKey;
}
