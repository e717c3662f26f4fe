import { Router, type Request, type Response } from 'express';
import type { RateLimiter } from '../../http/rate-limiter.js';
import { addressBucket, clientAddress } from '../../http/client-address.js';
import { SETUP_SCOPES } from '../agents/agents.service.js';
import { MCP_PATH, OAUTH_PATH, type AuthorizationServer } from './authorization-server.js';

/** Where RFC 9728 puts the resource's metadata: the well-known prefix before the resource's path. */
export const PROTECTED_RESOURCE_METADATA_PATH = `/.well-known/oauth-protected-resource${MCP_PATH}`;
/** Where RFC 8414 puts the metadata of an issuer with a path: the well-known prefix before it. */
export const AUTHORIZATION_SERVER_METADATA_PATH = `/.well-known/oauth-authorization-server${OAUTH_PATH}`;

/** Dynamic registrations one client address may make a minute: a registration is a row kept for a month. */
const REGISTRATIONS_PER_MINUTE = 10;

/**
 * The authorization server's HTTP face: the resource's metadata (RFC 9728), the server's
 * metadata (RFC 8414, and OpenID discovery below the issuer, both the library's document), and
 * the library's endpoints below {@link OAUTH_PATH}. Mounted before the JSON body parser: the
 * library reads its own bodies.
 */
export function oauthRouter(oauth: AuthorizationServer, rateLimiter: RateLimiter): Router {
  const router = Router();
  const handler = oauth.handler();
  const resourceMetadata = {
    resource: oauth.resource,
    authorization_servers: [oauth.issuer],
    scopes_supported: [...SETUP_SCOPES],
    bearer_methods_supported: ['header'],
    resource_name: 'GPU rental (remote MCP)',
  };
  const serveResourceMetadata = (_req: Request, res: Response) => {
    res.set('Cache-Control', 'public, max-age=300').json(resourceMetadata);
  };
  router.get([PROTECTED_RESOURCE_METADATA_PATH, '/.well-known/oauth-protected-resource'], serveResourceMetadata);
  // The library serves its document as OpenID discovery below the issuer; RFC 8414 asks for the
  // same document at the well-known prefix (and clients of the 2025-03 revision look at the root).
  router.get([AUTHORIZATION_SERVER_METADATA_PATH, '/.well-known/oauth-authorization-server'], (req, res) => {
    // As if mounted below the issuer, so the library names its endpoints below it too.
    req.originalUrl = `${OAUTH_PATH}/.well-known/openid-configuration`;
    req.url = '/.well-known/openid-configuration';
    handler(req, res);
  });
  router.post(`${OAUTH_PATH}/register`, async (req, _res, next) => {
    try {
      await rateLimiter.hit(
        `oauth-register:${addressBucket(clientAddress(req))}`,
        REGISTRATIONS_PER_MINUTE,
        60,
        'client registrations from this address',
      );
      next();
    } catch (err) {
      next(err);
    }
  });
  router.use(OAUTH_PATH, (req, res) => handler(req, res));
  return router;
}
