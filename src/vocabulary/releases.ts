/**
 * The file a service adds to the `gpr` and `gpr-mcp` tarballs it serves, at the package's root:
 * `{ "baseUrl": "<that service>" }`, so a copy installed from a service calls it by default. The
 * service writes it (http/releases.router.ts) and the clients read it (the SDK's config-file.ts).
 */
export const PACKAGED_SERVICE_FILE = 'service.json';
