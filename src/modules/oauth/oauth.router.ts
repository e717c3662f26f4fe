import { Router, type Request, type RequestHandler, type Response } from 'express';
import type { RateLimiter } from '../../http/rate-limiter.js';
import { addressBucket, clientAddress } from '../../http/client-address.js';
import { SETUP_SCOPES } from '../agents/agents.service.js';
import type { AuthorizationServer } from './authorization-server.js';
import {
  AUTHORIZATION_SERVER_METADATA_PATH,
  OAUTH_PATH,
  PROTECTED_RESOURCE_METADATA_PATH,
} from '../../vocabulary/remote-mcp.js';

/**
 * The authorization server's HTTP face: the resource's metadata (RFC 9728), the server's
 * metadata (RFC 8414, and OpenID discovery below the issuer, both the library's document), and
 * the library's endpoints below {@link OAUTH_PATH}. Mounted before the JSON body parser: the
 * library reads its own bodies.
 */
export function oauthRouter(oauth: AuthorizationServer, rateLimiter: RateLimiter, ratePerMinute: number): Router {
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
  // A registration is a row kept, and each authorization request may open a consent session and
  // fetch a client's metadata document: both are counted per client address (one budget,
  // OAUTH_RATE_PER_MINUTE) before the library sees them.
  const limit =
    (what: string): RequestHandler =>
    async (req, _res, next) => {
      try {
        await rateLimiter.hit(
          `oauth:${addressBucket(clientAddress(req))}`,
          ratePerMinute,
          60,
          `OAuth ${what} requests from this address`,
        );
        next();
      } catch (err) {
        next(err);
      }
    };
  router.post(`${OAUTH_PATH}/register`, limit('registration'));
  router.get(`${OAUTH_PATH}/authorize`, limit('authorization'));
  router.use(OAUTH_PATH, (req, res) => handler(req, res));
  return router;
}
