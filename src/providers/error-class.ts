/**
 * What a plugin's methods throw when its cloud could not answer (see `ProviderApiError` in
 * `src/providers/provider-http.ts`). The host reads `errorClass` for `/api/v1/providers` and
 * its logs; any other thrown error counts as `internal`. A file of its own, below the plugin
 * contract (`provider.ts`, which passes it on) and the check's report (`provider-check.ts`).
 */
export type ProviderErrorClass =
  'auth' | 'rate_limited' | 'unavailable' | 'timeout' | 'bad_response' | 'request' | 'internal';
