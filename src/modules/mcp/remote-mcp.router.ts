import type { IncomingMessage, ServerResponse } from 'node:http';
import { GprClient } from '@gpu-rental/sdk';
import { hostHeaderValidation, requireBearerAuth } from '@modelcontextprotocol/express';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, OAuthError, OAuthErrorCode, type AuthInfo } from '@modelcontextprotocol/server';
import { Router } from 'express';
import { createToolServer } from '../../../clients/mcp/src/server.js';
import { clientAddress } from '../../http/client-address.js';
import type { Logger } from '../../logger.js';
import { TokenRefused, type AuthorizationServer } from '../oauth/authorization-server.js';
import { MCP_PATH, PROTECTED_RESOURCE_METADATA_PATH } from '../../vocabulary/remote-mcp.js';
import { inProcessFetch } from './in-process-fetch.js';
import { deepLink, topupPayload } from '../telegram/deep-links.js';

/** The largest JSON-RPC body /mcp reads: a create_rental with machine settings fits many times over. */
const MAX_BODY_BYTES = 1024 * 1024;

/** What a verified token leaves on the request for the tool server: the key it acts as, and the caller's address. */
interface RemoteCaller {
  keyId: string;
  remoteAddress: string;
}

export interface RemoteMcpDeps {
  oauth: AuthorizationServer;
  publicBaseUrl: string;
  logger: Logger;
  /** This process's app, which the tools call in-process for the token's key. */
  app: () => (req: IncomingMessage, res: ServerResponse) => void;
  version: string;
  /** The owner bot's username (TELEGRAM_BOT_USERNAME): where an agent key's owner adds credits by URL. */
  botUsername?: string;
}

/**
 * `/mcp` on the api role: the tool server of gpr-mcp over Streamable HTTP, stateless (a fresh
 * server per request; 2026-07-28 and 2025-era clients alike), behind DNS-rebinding protection
 * (the Host must be PUBLIC_BASE_URL's) and an OAuth bearer token of our authorization server
 * bound to this resource. The tools act as the AGENT key the token names, through the same SDK
 * client gpr-mcp uses, calling this process's API without a socket.
 */
export function remoteMcpRouter(deps: RemoteMcpDeps): Router {
  const { oauth, logger } = deps;
  const log = logger.child({ component: 'remote-mcp' });
  const base = new URL(deps.publicBaseUrl);
  const resourceMetadataUrl = `${base.origin}${PROTECTED_RESOURCE_METADATA_PATH}`;
  const handler = createMcpHandler(
    (ctx) => {
      const caller = ctx.authInfo?.extra?.caller as RemoteCaller | undefined;
      if (!caller) throw new Error('an /mcp request reached the tool server without a verified token');
      let client: GprClient | undefined;
      return createToolServer(
        {
          client: () =>
            (client ??= new GprClient({
              baseUrl: base.origin,
              fetch: inProcessFetch(deps.app(), caller),
              retries: 0,
              userAgent: `gpr-remote-mcp/${deps.version}`,
            })),
          allowSpend: true,
          allowSecrets: true,
          // The token's key never holds `billing`: credits are asked of its owner, in the bot.
          ownerTopupUrl: (amountMinor) =>
            deps.botUsername ? deepLink(deps.botUsername, topupPayload(amountMinor)) : null,
          log: (line) => log.debug({ keyId: caller.keyId }, line),
        },
        { version: deps.version },
      );
    },
    { maxRequestBodySize: MAX_BODY_BYTES, onerror: (err) => log.warn({ err }, 'remote mcp request failed') },
  );
  const serve = toNodeHandler(handler);
  const router = Router();
  router.all(
    MCP_PATH,
    // URL writes an IPv6 host in brackets, as the middleware expects it.
    hostHeaderValidation([base.hostname]),
    (req, res, next) => {
      (req as { mcpCallerAddress?: string }).mcpCallerAddress = clientAddress(req);
      next();
    },
    requireBearerAuth({
      verifier: {
        verifyAccessToken: async (token: string): Promise<AuthInfo> => {
          try {
            const v = await oauth.verify(token);
            return {
              token,
              clientId: v.clientId,
              scopes: v.scopes,
              expiresAt: v.expiresAt,
              resource: new URL(v.resource),
              extra: { keyId: v.keyId },
            };
          } catch (err) {
            if (err instanceof TokenRefused) throw new OAuthError(OAuthErrorCode.InvalidToken, err.message);
            throw err;
          }
        },
      },
      expectedResource: new URL(oauth.resource),
      resourceMetadataUrl,
    }),
    (req, res) => {
      const auth = req.auth!;
      const keyId = String(auth.extra?.keyId);
      const remoteAddress = (req as { mcpCallerAddress?: string }).mcpCallerAddress ?? 'unknown';
      req.auth = { ...auth, extra: { ...auth.extra, caller: { keyId, remoteAddress } satisfies RemoteCaller } };
      serve(req, res).catch((err: unknown) => {
        log.error({ err }, 'remote mcp request failed');
        if (!res.headersSent)
          res.status(500).json({ jsonrpc: '2.0', id: null, error: { code: -32603, message: 'Internal error' } });
        else res.end();
      });
    },
  );
  return router;
}
