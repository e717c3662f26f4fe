import spec from '../generated/swagger.json' with { type: 'json' };
import { ERROR_STATUS } from '../errors/error-codes.js';
import { exampleOf } from './openapi-examples.js';
import { DISCOVERY_STEP, QUICKSTART_STEPS, renderOpenApiDescription } from './quickstart.js';
import { METHODS, ROUTE_FACTS } from './route-facts.js';

/** A node of the OpenAPI document, whose shape varies by position. */
export type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Tags in the order an agent meets them. */
export const TAG_ORDER: { name: string; description: string }[] = [
  { name: 'Inventory', description: 'What can be rented, at what price. No key needed.' },
  { name: 'Providers', description: 'The GPU clouds behind the inventory. No key needed.' },
  { name: 'Account', description: 'Headless signup and the account a key belongs to.' },
  { name: 'Billing', description: 'Compute credits: balance, and hosted top-up links a human pays.' },
  { name: 'Rentals', description: 'Renting a machine and following it until it runs.' },
  { name: 'Deployments', description: 'The running machine: SSH credentials and termination.' },
  {
    name: 'Events',
    description: 'What happened to your rentals and account, kept in order: page through it, or follow it as a stream.',
  },
  {
    name: 'Agents',
    description: 'Connecting agents to an owner account: setup codes, approvals, agent keys (owner keys for issuing).',
  },
  { name: 'Webhooks', description: 'Called by the payment provider, not by clients.' },
  {
    name: 'Webhook endpoints',
    description: 'Events pushed to your URL as they happen, signed (Standard Webhooks), retried for a day.',
  },
];

const HEADERS = {
  'X-Request-Id': {
    description: 'The request id (also in the body); quote it when reporting a problem.',
    schema: { type: 'string' },
  },
  'Retry-After': { description: 'Seconds to wait before asking again.', schema: { type: 'integer', minimum: 1 } },
  ETag: {
    description: 'Version of the inventory snapshot; send it back as If-None-Match for a 304.',
    schema: { type: 'string' },
  },
  'WWW-Authenticate': {
    description: 'Always `Bearer`, whatever the cause.',
    schema: { type: 'string', enum: ['Bearer'] },
  },
};

/** Headers each answer may carry, and the 304 of an ETag'd read, from what the route states about itself. */
function decorateResponses(op: Json): void {
  const etagged = op[ROUTE_FACTS.etagged] === true;
  const retryAfter = new Set(((op[ROUTE_FACTS.retryAfter] as number[] | undefined) ?? []).map(String));
  for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
    const headers: Json = { 'X-Request-Id': HEADERS['X-Request-Id'] };
    if (status === '429' || retryAfter.has(status)) headers['Retry-After'] = HEADERS['Retry-After'];
    if (status === '401') headers['WWW-Authenticate'] = HEADERS['WWW-Authenticate'];
    if (status === '200' && etagged) headers.ETag = HEADERS.ETag;
    response.headers = { ...response.headers, ...headers };
  }
  if (etagged && !op.responses['304']) {
    op.responses['304'] = {
      description: 'Not Modified: If-None-Match named the current ETag; no body.',
      headers: { 'X-Request-Id': HEADERS['X-Request-Id'], ETag: HEADERS.ETag },
    };
  }
}

function addExamples(op: Json, components: Json, base: string, requestBody: unknown): void {
  const body = op.requestBody?.content?.['application/json'];
  if (body) body.example = requestBody ?? exampleOf(body.schema, components, base);
  for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
    const content = response.content?.['application/json'];
    if (content && /^2/.test(status) && content.example === undefined)
      content.example = exampleOf(content.schema, components, base);
  }
}

function markOwnerOnly(op: Json): void {
  op.security = (op.security as Json[] | undefined)?.map((s) => ('bearer' in s ? { ownerBearer: s.bearer } : s)) ?? [
    { ownerBearer: [] },
  ];
  op.description = `**Owner keys only**: an agent key is refused with 403 FORBIDDEN.\n\n${op.description ?? ''}`.trim();
}

/**
 * GET /api/v1/events also answers `Accept: text/event-stream` (served ahead of the generated
 * routes, so tsoa cannot state it): the 200's second media type, and the header it resumes from.
 */
function describeEventStream(op: Json): void {
  const ok = op.responses?.['200'];
  if (!ok) return;
  ok.content = {
    ...ok.content,
    'text/event-stream': {
      schema: {
        type: 'string',
        description:
          'Server-Sent Events: each event as `id: <event id>`, `event: <type>`, `data: <the event as JSON: id, type, createdAt, data>`, then a blank line. ' +
          'A `: heartbeat` comment every 15 seconds; the stream ends after at most 5 minutes: reconnect with `Last-Event-ID` set to the last id received (EventSource does it). ' +
          'With `Last-Event-ID` or `after` the events after that id are replayed first; without either it starts with the next event.',
      },
      example:
        'id: 1042\nevent: rental.active\ndata: {"id":"1042","type":"rental.active","createdAt":"2025-01-01T12:00:00.000Z","data":{"rentalId":"…","status":"ACTIVE"}}\n\n: heartbeat\n\n',
    },
  };
  op.parameters = [
    ...((op.parameters as Json[] | undefined) ?? []),
    {
      name: 'Last-Event-ID',
      in: 'header',
      required: false,
      description:
        'For the stream: the last event id received; the stream replays what followed it (takes the place of `after`).',
      schema: { type: 'string', maxLength: 20, pattern: '^[0-9]+$' },
    },
  ];
}

/** The tsoa-generated contract, finished for clients and with this deployment's base URL as its server. */
export function openApiDocument(publicBaseUrl: string): Json {
  const doc: Json = structuredClone(spec);
  const components = doc.components.schemas as Json;
  const stepBodies = new Map([DISCOVERY_STEP, ...QUICKSTART_STEPS].map((s) => [s.operationId, s.body]));
  for (const item of Object.values(doc.paths as Record<string, Json>)) {
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      if (op[ROUTE_FACTS.ownerOnly] === true) markOwnerOnly(op);
      if (op.operationId === 'listEvents') describeEventStream(op);
      decorateResponses(op);
      addExamples(op, components, publicBaseUrl, stepBodies.get(op.operationId));
      for (const fact of Object.values(ROUTE_FACTS)) delete op[fact];
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
    description:
      "An OWNER key (from the Telegram bot's /ownerkey, or the operator's npm run owner -- create): Authorization: Bearer gpr_<prefix>.<secret>. Agent keys are refused.",
  };
  const used = new Set(
    Object.values(doc.paths as Record<string, Json>).flatMap((item) =>
      METHODS.flatMap((m) => (item[m]?.tags as string[]) ?? []),
    ),
  );
  const known = TAG_ORDER.filter((t) => used.has(t.name));
  doc.tags = [...known, ...[...used].filter((t) => !TAG_ORDER.some((k) => k.name === t)).map((name) => ({ name }))];
  doc.info = {
    ...doc.info,
    version: 'v1',
    description: renderOpenApiDescription(publicBaseUrl, spec.info.description),
  };
  doc.servers = [{ url: publicBaseUrl }];
  return doc;
}
