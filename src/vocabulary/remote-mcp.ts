// Where remote MCP answers, below a service's base URL: what the service serves, what its index
// and quickstart link to, and what a client may look for.

/** The remote MCP endpoint (Streamable HTTP), and the protected resource every OAuth token names. */
export const MCP_PATH = '/mcp';
/** The authorization server (its issuer is the base URL with this path). */
export const OAUTH_PATH = '/oauth';
/** The resource's metadata (RFC 9728: the well-known prefix before the resource's path). */
export const PROTECTED_RESOURCE_METADATA_PATH = `/.well-known/oauth-protected-resource${MCP_PATH}`;
/** The authorization server's metadata (RFC 8414: the well-known prefix before the issuer's path). */
export const AUTHORIZATION_SERVER_METADATA_PATH = `/.well-known/oauth-authorization-server${OAUTH_PATH}`;
