// oidc-provider, loaded without its one start-up warning. Version 9 prints "Unsupported runtime"
// on standard error when it is imported on Node.js older than 22; the service runs on Node 20,
// where the whole suite runs the library, and that line would otherwise open the output of every
// process and command (docs/oauth.md). Every other warning of the library is printed as it is.
import type * as OidcProvider from 'oidc-provider';

const RUNTIME_WARNING = 'oidc-provider WARNING: Unsupported runtime.';

const warn = console.warn;
let loaded: typeof OidcProvider;
console.warn = (...args: unknown[]) => {
  if (!String(args[0]).startsWith(RUNTIME_WARNING)) warn(...args);
};
try {
  loaded = await import('oidc-provider');
} finally {
  console.warn = warn;
}

export const Provider = loaded.default;
export const { errors, interactionPolicy } = loaded;
