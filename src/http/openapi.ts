import spec from '../generated/swagger.json' with { type: 'json' };
import { ERROR_STATUS } from '../errors/error-codes.js';
import { exampleOf } from './openapi-examples.js';
import { DISCOVERY_STEP, QUICKSTART_STEPS, renderOpenApiDescription } from './quickstart.js';

/** A node of the OpenAPI document, whose shape varies by position. */
export type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

interface OperationInfo {
  /** The name generated clients give the call. */
  operationId: string;
  /** Needs an OWNER key: an agent key is refused with 403 FORBIDDEN. */
  ownerOnly?: boolean;
}

/**
 * Client-facing names of the operations, by `METHOD path`. tsoa names operations after the
 * controller methods (`Get`, `List`), which repeat across controllers; clients need unique,
 * descriptive names. A route missing here keeps tsoa's name and fails the OpenAPI test.
 */
export const OPERATIONS: Record<string, OperationInfo> = {
  'GET /api/v1/offers': { operationId: 'listOffers' },
  'GET /api/v1/gpus': { operationId: 'listGpus' },
  'GET /api/v1/gpus/{slug}': { operationId: 'getGpu' },
  'GET /api/v1/providers': { operationId: 'listProviders' },
  'GET /api/v1/providers/{id}': { operationId: 'getProvider' },
  'POST /api/v1/signup': { operationId: 'signup' },
  'GET /api/v1/me': { operationId: 'getAccount' },
  'PUT /api/v1/me/email': { operationId: 'setAccountEmail' },
  'GET /api/v1/billing/balance': { operationId: 'getBalance' },
  'POST /api/v1/billing/topups': { operationId: 'createTopup' },
  'GET /api/v1/billing/topups/{topupId}': { operationId: 'getTopup' },
  'POST /api/v1/rentals': { operationId: 'createRental' },
  'GET /api/v1/rentals': { operationId: 'listRentals' },
  'GET /api/v1/rentals/{id}': { operationId: 'getRental' },
  'POST /api/v1/rentals/{id}/terminate': { operationId: 'terminateRental' },
  'POST /api/v1/orders/checkout': { operationId: 'createCheckout' },
  'GET /api/v1/deployments': { operationId: 'listDeployments' },
  'GET /api/v1/deployments/{id}': { operationId: 'getDeployment' },
  'POST /api/v1/deployments/{id}/terminate': { operationId: 'terminateDeployment' },
  'POST /api/v1/deployments/{id}/credentials/reveal': { operationId: 'revealCredentials' },
  'POST /api/v1/agent-authorizations': { operationId: 'beginAgentAuthorization' },
  'POST /api/v1/agent-authorizations/approve': { operationId: 'approveAgentAuthorization', ownerOnly: true },
  'POST /api/v1/agent-setups/exchange': { operationId: 'exchangeSetupCode' },
  'POST /api/v1/agent-keys': { operationId: 'issueAgentKey', ownerOnly: true },
  'GET /api/v1/agent-keys': { operationId: 'listAgentKeys', ownerOnly: true },
  'DELETE /api/v1/agent-keys/{id}': { operationId: 'revokeAgentKey', ownerOnly: true },
  'GET /api/v1/owner-keys': { operationId: 'listOwnerKeys', ownerOnly: true },
  'DELETE /api/v1/owner-keys/{id}': { operationId: 'revokeOwnerKey', ownerOnly: true },
  'POST /api/v1/webhooks/stripe': { operationId: 'receiveStripeWebhook' },
};

/** Tags in the order an agent meets them. */
export const TAG_ORDER: { name: string; description: string }[] = [
  { name: 'Inventory', description: 'What can be rented, at what price. No key needed.' },
  { name: 'Providers', description: 'The GPU clouds behind the inventory. No key needed.' },
  { name: 'Account', description: 'Headless signup and the account a key belongs to.' },
  { name: 'Billing', description: 'Compute credits: balance, and hosted top-up links a human pays.' },
  { name: 'Rentals', description: 'Renting a machine and following it until it runs.' },
  { name: 'Deployments', description: 'The running machine: SSH credentials and termination.' },
  { name: 'Agents', description: 'Connecting agents to an owner account: setup codes, approvals, agent keys (owner keys for issuing).' },
  { name: 'Webhooks', description: 'Called by the payment provider, not by clients.' },
];

/** Operations whose 409 may say when to ask again: AGENT_AUTHORIZATION_PENDING, DEPLOYMENT_NOT_ACTIVE while starting. */
const PENDING_409 = new Set(['exchangeSetupCode', 'revealCredentials']);
/** Operations answering from the ETag'd inventory snapshot. */
const ETAGGED = new Set(['listOffers', 'listGpus', 'getGpu', 'listProviders', 'getProvider']);

const HEADERS = {
  'X-Request-Id': { description: 'The request id (also in the body); quote it when reporting a problem.', schema: { type: 'string' } },
  'Retry-After': { description: 'Seconds to wait before asking again.', schema: { type: 'integer', minimum: 1 } },
  ETag: { description: 'Version of the inventory snapshot; send it back as If-None-Match for a 304.', schema: { type: 'string' } },
  'WWW-Authenticate': { description: 'Always `Bearer`, whatever the cause.', schema: { type: 'string', enum: ['Bearer'] } },
};

const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

/**
 * Statuses the v1 contract (docs/api.md) declares for a route where this service has no case of
 * its own: each keeps its declaration (clients generated from the document handle it) and says
 * plainly when it comes, or that it does not and where the code does apply. Used only while the route's own description is
 * the generic "declared by the v1 contract" text, so a route that gains a real case keeps its words.
 */
const CONTRACT_ONLY: Record<string, string> = {
  'POST /api/v1/agent-authorizations 409':
    'Never for this call: every call begins a new, independent session, so none can conflict. The 409s of this flow (AGENT_AUTHORIZATION_PENDING, AGENT_SETUP_INVALID) come from the exchange.',
  'POST /api/v1/agent-keys 404':
    'Never for this call: issuing names no existing resource. NOT_FOUND applies to revoking (DELETE /api/v1/agent-keys/{id}) a key that is not on the account.',
  'GET /api/v1/me 402':
    'Never for this read: a frozen or negative account still reads its state (`balance.frozen`, `balance.creditsMinor`). ACCOUNT_FROZEN and INSUFFICIENT_CREDITS answer the calls that spend.',
  'GET /api/v1/me 404': 'Never for this read: a valid key always has its account; a revoked key gets the uniform 401.',
  'GET /api/v1/me 409': 'Never for this read: it changes nothing, so nothing can conflict.',
  'GET /api/v1/me 422': 'Never for this read: it takes no parameters.',
  'GET /api/v1/billing/balance 402':
    'Never for this read: a frozen or negative account still reads its balance and entries. ACCOUNT_FROZEN and INSUFFICIENT_CREDITS answer the calls that spend.',
  'GET /api/v1/billing/balance 404': 'Never for this read: a valid key always has its account; `before` past the oldest entry is an empty page, not 404.',
  'GET /api/v1/billing/balance 409': 'Never for this read: it changes nothing, so nothing can conflict.',
  'POST /api/v1/billing/topups 402':
    'Never for this call: adding credits is how a frozen or negative account recovers, so it is always allowed.',
  'POST /api/v1/billing/topups 404': 'Never for this call: it names no existing resource (GET /api/v1/billing/topups/{topupId} answers NOT_FOUND for an unknown top-up).',
  'GET /api/v1/rentals/{id} 402': 'Never for this read: a frozen or negative account still reads its rentals.',
  'GET /api/v1/rentals/{id} 409': 'Never for this read: it changes nothing, so nothing can conflict.',
  'GET /api/v1/rentals/{id} 422': 'Never for this read: any id is accepted, and one that names no rental of the caller is 404 NOT_FOUND.',
};
const GENERIC_DECLARATION = /^Declared by the v1 contract/;

function decorateResponses(op: Json, operationId: string, route: string): void {
  for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
    const contractOnly = CONTRACT_ONLY[`${route} ${status}`];
    if (contractOnly && GENERIC_DECLARATION.test(String(response.description))) response.description = contractOnly;
    const headers: Json = { 'X-Request-Id': HEADERS['X-Request-Id'] };
    if (status === '429' || (status === '409' && PENDING_409.has(operationId))) headers['Retry-After'] = HEADERS['Retry-After'];
    if (status === '401') headers['WWW-Authenticate'] = HEADERS['WWW-Authenticate'];
    if (status === '200' && ETAGGED.has(operationId)) headers.ETag = HEADERS.ETag;
    response.headers = { ...response.headers, ...headers };
  }
  if (ETAGGED.has(operationId) && !op.responses['304']) {
    op.responses['304'] = { description: 'Not Modified: If-None-Match named the current ETag; no body.', headers: { 'X-Request-Id': HEADERS['X-Request-Id'], ETag: HEADERS.ETag } };
  }
}

function addExamples(op: Json, components: Json, base: string, requestBody: unknown): void {
  const body = op.requestBody?.content?.['application/json'];
  if (body) body.example = requestBody ?? exampleOf(body.schema, components, base);
  for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
    const content = response.content?.['application/json'];
    if (content && /^2/.test(status) && content.example === undefined) content.example = exampleOf(content.schema, components, base);
  }
}

function markOwnerOnly(op: Json): void {
  op.security = (op.security as Json[] | undefined)?.map((s) => ('bearer' in s ? { ownerBearer: s.bearer } : s)) ?? [{ ownerBearer: [] }];
  op.description = `**Owner keys only**: an agent key is refused with 403 FORBIDDEN.\n\n${op.description ?? ''}`.trim();
}

/** The tsoa-generated contract, finished for clients and with this deployment's base URL as its server. */
export function openApiDocument(publicBaseUrl: string): Json {
  const doc: Json = structuredClone(spec);
  const components = doc.components.schemas as Json;
  const stepBodies = new Map([DISCOVERY_STEP, ...QUICKSTART_STEPS].map((s) => [s.operationId, s.body]));
  for (const [path, item] of Object.entries(doc.paths as Record<string, Json>)) {
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      const info = OPERATIONS[`${method.toUpperCase()} ${path}`];
      if (info) op.operationId = info.operationId;
      if (info?.ownerOnly) markOwnerOnly(op);
      decorateResponses(op, op.operationId, `${method.toUpperCase()} ${path}`);
      addExamples(op, components, publicBaseUrl, stepBodies.get(op.operationId));
    }
  }
  components.ErrorCode = {
    type: 'string',
    description: 'Every error code this API returns; each always comes with the same HTTP status.',
    enum: Object.keys(ERROR_STATUS),
  };
  components.ErrorBody.properties.code = { $ref: '#/components/schemas/ErrorCode' };
  doc.components.securitySchemes.ownerBearer = {
    type: 'http',
    scheme: 'bearer',
    description: 'An OWNER key (from the Telegram bot\'s /ownerkey, or the operator\'s npm run owner -- create): Authorization: Bearer gpr_<prefix>.<secret>. Agent keys are refused.',
  };
  const used = new Set(Object.values(doc.paths as Record<string, Json>).flatMap((item) => METHODS.flatMap((m) => (item[m]?.tags as string[]) ?? [])));
  const known = TAG_ORDER.filter((t) => used.has(t.name));
  doc.tags = [...known, ...[...used].filter((t) => !TAG_ORDER.some((k) => k.name === t)).map((name) => ({ name }))];
  doc.info = { ...doc.info, version: 'v1', description: renderOpenApiDescription(publicBaseUrl, spec.info.description) };
  doc.servers = [{ url: publicBaseUrl }];
  return doc;
}
