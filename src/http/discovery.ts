import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import express, { Router, type Request, type Response } from 'express';
import { envelope } from '../errors/envelope.js';
import { openApiDocument } from './openapi.js';
import { releasesManifestUrl, renderLlmsTxt } from './quickstart.js';
import {
  AUTHORIZATION_SERVER_METADATA_PATH,
  MCP_PATH,
  PROTECTED_RESOURCE_METADATA_PATH,
} from '../vocabulary/remote-mcp.js';
import { RECEIPT_KEYS_PATH } from '../vocabulary/receipts.js';

/** Where an agent that knows only the base URL goes next (a hosted agent: to `links.mcp`). */
export interface ApiIndex {
  name: string;
  description: string;
  apiVersion: string;
  links: Record<
    | 'openapi'
    | 'docs'
    | 'llms'
    | 'gpus'
    | 'offers'
    | 'signup'
    | 'providers'
    | 'health'
    | 'releases'
    | 'receiptKeys'
    | 'mcp'
    | 'mcpResourceMetadata'
    | 'oauthAuthorizationServer',
    string
  >;
}

export function apiIndex(base: string, releasesUrl: string): ApiIndex {
  return {
    name: 'GPU Rental API',
    description:
      'Rent GPU machines by the hour over HTTP. Start with llms (a quickstart) or openapi (the contract); an agent host that adds MCP servers by URL connects to mcp.',
    apiVersion: 'v1',
    links: {
      openapi: `${base}/api/openapi.json`,
      docs: `${base}/docs`,
      llms: `${base}/llms.txt`,
      gpus: `${base}/api/v1/gpus`,
      offers: `${base}/api/v1/offers`,
      signup: `${base}/api/v1/signup`,
      providers: `${base}/api/v1/providers`,
      health: `${base}/healthz`,
      releases: releasesManifestUrl(releasesUrl),
      receiptKeys: `${base}${RECEIPT_KEYS_PATH}`,
      // Remote MCP for hosted agents: the endpoint, and where its OAuth is described.
      mcp: `${base}${MCP_PATH}`,
      mcpResourceMetadata: `${base}${PROTECTED_RESOURCE_METADATA_PATH}`,
      oauthAuthorizationServer: `${base}${AUTHORIZATION_SERVER_METADATA_PATH}`,
    },
  };
}

/**
 * Swagger UI's files, found without loading the package: its entry point evaluates the whole
 * browser bundle (10 MB of heap) only to tell where it lies.
 */
const SWAGGER_UI_DIR = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));

// Swagger UI's start-up lives in a file of ours: the CSP allows no inline script.
const DOCS_INIT_JS = `window.ui = SwaggerUIBundle({ url: '/api/openapi.json', dom_id: '#swagger-ui', deepLinking: true, validatorUrl: null });\n`;

const DOCS_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>GPU Rental API reference</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
<link rel="alternate" type="application/json" href="/api/openapi.json">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>`;

/**
 * What needs no key and no database: the JSON index at `/`, `/api` and `/api/v1` (with the
 * client releases' manifest among its links), the quickstart at `/llms.txt`, the OpenAPI document
 * and the `/docs` reference page.
 */
export function discoveryRouter(publicBaseUrl: string, releasesUrl: string): Router {
  const router = Router();
  const index = apiIndex(publicBaseUrl, releasesUrl);
  const llms = renderLlmsTxt(publicBaseUrl, releasesUrl);
  const spec = openApiDocument(publicBaseUrl);
  router.get(['/', '/api', '/api/v1'], (req: Request, res: Response) => {
    res.json(envelope(req, index));
  });
  router.get('/llms.txt', (_req: Request, res: Response) => {
    res.type('text/plain; charset=utf-8').send(llms);
  });
  router.get('/api/openapi.json', (_req: Request, res: Response) => {
    res.json(spec);
  });
  router.use('/docs/assets', express.static(SWAGGER_UI_DIR, { index: false, maxAge: '1h' }));
  router.get('/docs/init.js', (_req: Request, res: Response) => {
    res.type('application/javascript').send(DOCS_INIT_JS);
  });
  router.get('/docs', (_req: Request, res: Response) => {
    res.type('html').send(DOCS_HTML);
  });
  return router;
}
