import {
  AUTHORIZATION_SERVER_METADATA_PATH,
  MCP_PATH,
  PROTECTED_RESOURCE_METADATA_PATH,
} from '../vocabulary/remote-mcp.js';
import { AUTH_HINT, IDEMPOTENCY_KEY_HINT, UUID_SHELL } from '../vocabulary/access-hints.js';
import { BUDGET_RULE } from '../vocabulary/budget-hints.js';
import {
  ACTIVE_MEANS,
  GPU_COUNT_IN_NAME,
  GPU_FAMILY_INTENT,
  LEASE_RULE,
  MACHINE_SETTINGS_RULE,
  PHASES_RULE,
  WAIT_FOR_CAPACITY_RULE,
} from '../vocabulary/machine-hints.js';
import { MONEY_MEANING } from '../vocabulary/money.js';
import { WEBHOOK_VERIFY_RULE, WEBHOOK_VERIFY_SNIPPET } from '../vocabulary/webhooks.js';
import { RECEIPT_KEYS_PATH } from '../vocabulary/receipts.js';
import { MANIFEST_FILE } from './releases.router.js';

/**
 * The agent's quickstart, kept once as data: `/llms.txt` and the OpenAPI document's
 * `info.description` are both rendered from these steps, and each step's body is the request
 * example of its operation, so the three cannot disagree.
 */
export interface QuickstartStep {
  /** The operation this step calls (its OpenAPI operationId). */
  operationId: string;
  title: string;
  method: 'GET' | 'POST';
  /** Path with `{placeholders}` filled from earlier answers. */
  path: string;
  /** A query string for the path (without `?`), e.g. a waiting read's `waitFor`. */
  query?: string;
  /** Sends `Authorization: Bearer $TOKEN`. */
  auth: boolean;
  /** Sends a fresh `Idempotency-Key` (reuse it when retrying the same call). */
  idempotent: boolean;
  /** The exact JSON body, if the call takes one. */
  body?: Record<string, unknown>;
  /** What to keep from the answer, and what to do next. */
  then: string;
}

/** Looking before signing up: no key needed. */
export const DISCOVERY_STEP: QuickstartStep = {
  operationId: 'listGpus',
  title: 'See what is on offer (no key needed)',
  method: 'GET',
  path: '/api/v1/gpus',
  auth: false,
  idempotent: false,
  then: 'Prices are USD cents per hour for the whole machine. `GET /api/v1/offers` lists every offer with its `id`.',
};

/** The six calls from nothing to a running machine and back. */
export const QUICKSTART_STEPS: QuickstartStep[] = [
  {
    operationId: 'signup',
    title: 'Create an account and a key',
    method: 'POST',
    path: '/api/v1/signup',
    auth: false,
    idempotent: true,
    body: { maxPerRentalMinor: 2000, budgetLimitMinor: 10000, maxConcurrentDeployments: 1 },
    then: 'Keep `data.token` (`gpr_<prefix>.<secret>`) as TOKEN: it is shown once. Send it as `Authorization: Bearer $TOKEN` from now on.',
  },
  {
    operationId: 'createTopup',
    title: 'Ask a human to add credits',
    method: 'POST',
    path: '/api/v1/billing/topups',
    auth: true,
    idempotent: true,
    body: { amountMinor: 2000 },
    then: 'Give `data.paymentUrl` to your human; the balance (`GET /api/v1/billing/balance`) rises once they have paid.',
  },
  {
    operationId: 'createRental',
    title: 'Rent a GPU',
    method: 'POST',
    path: '/api/v1/rentals',
    auth: true,
    idempotent: true,
    body: { gpuModel: 'H100 SXM', gpuCount: 1, maxHourlyPriceMinor: 400 },
    then:
      'Keep `data.rentalId` as RENTAL_ID and `data.deploymentId` as DEPLOYMENT_ID. Or rent one exact offer: `{"offerId": "<id from /offers>"}`. ' +
      'Optional fields say what runs (`machine`: image, env, startupScript, ports, diskGb), for how long (`terminateAfterSeconds`) and whether to wait for capacity (`waitForCapacitySeconds`).',
  },
  {
    operationId: 'getRental',
    title: 'Wait until it is ACTIVE',
    method: 'GET',
    path: '/api/v1/rentals/{rentalId}',
    query: 'waitFor=ACTIVE,FAILED&waitSeconds=25',
    auth: true,
    idempotent: false,
    then:
      'A waiting read: it answers as soon as `data.status` is `ACTIVE` or `FAILED` (with `failureReason`), or after 25 s with the rental as it is; ' +
      'repeat it until then, no polling loop needed. Meanwhile `data.phase` says where it stands. ' +
      `${ACTIVE_MEANS} \`data.endpoints\` then give the URL of each exposed port. ` +
      'To follow every rental at once, read `GET /api/v1/events` (JSON pages, or `Accept: text/event-stream`), or register a signed webhook at `POST /api/v1/webhook-endpoints`.',
  },
  {
    operationId: 'revealCredentials',
    title: 'Get SSH access',
    method: 'POST',
    path: '/api/v1/deployments/{deploymentId}/credentials/reveal',
    auth: true,
    idempotent: false,
    then: 'Save `data.privateKey` to a file (mode 600) and run `data.sshCommand`. Send no body and no JSON Content-Type.',
  },
  {
    operationId: 'terminateDeployment',
    title: 'Stop paying: terminate',
    method: 'POST',
    path: '/api/v1/deployments/{deploymentId}/terminate',
    auth: true,
    idempotent: false,
    then: 'Answers 202 at once; the machine and everything on it are destroyed, and `GET /api/v1/rentals/{rentalId}` ends at `TERMINATED`.',
  },
];

/**
 * A rental with everything an agent may set: an image, variables (secrets), a startup script, an
 * exposed port and a two-hour lease. The same fields as the request schema's, with its examples.
 */
export const MACHINE_EXAMPLE: QuickstartStep = {
  operationId: 'createRental',
  title: 'Rent a machine that serves a model',
  method: 'POST',
  path: '/api/v1/rentals',
  auth: true,
  idempotent: true,
  body: {
    gpuModel: 'H100 SXM',
    gpuCount: 1,
    maxHourlyPriceMinor: 400,
    budgetMinor: 1000,
    machine: {
      image: 'pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime',
      env: { HF_TOKEN: 'hf_example', MODEL_ID: 'meta-llama/Llama-3.1-8B' },
      startupScript: '#!/bin/bash\npip install vllm && vllm serve "$MODEL_ID" --port 8000\n',
      ports: [8000],
    },
    terminateAfterSeconds: 7200,
  },
  then: 'Once ACTIVE, `data.endpoints` has `[{"port": 8000, "url": "https://..."}]`; two hours later the rental ends (`endsAt`, reason EXPIRED).',
};

/** `rentalId` -> `RENTAL_ID`: the shell variable a step's answer is kept in. */
function shellName(param: string): string {
  return param.replace(/([a-z])([A-Z])/g, '$1_$2').toUpperCase();
}

/** The step's call as one shell command against `base`. */
export function curlOf(step: QuickstartStep, base: string): string {
  const url = `${base}${step.path.replace(/\{(\w+)\}/g, (_, n: string) => `$${shellName(n)}`)}${step.query ? `?${step.query}` : ''}`;
  // Quoted: the shell would take a query's `&` for its own.
  const parts = [`curl -s${step.method === 'GET' ? '' : ` -X ${step.method}`} ${step.query ? `"${url}"` : url}`];
  if (step.auth) parts.push('-H "Authorization: Bearer $TOKEN"');
  if (step.idempotent) parts.push(`-H "Idempotency-Key: ${UUID_SHELL}"`);
  if (step.body) parts.push(`-H 'Content-Type: application/json' -d '${JSON.stringify(step.body)}'`);
  return parts.join(' \\\n     ');
}

const ENVELOPE_NOTE =
  'Every success is `{"data": ..., "meta": {"requestId", "apiVersion": "v1"}}`; every error is ' +
  '`{"error": {"code", "message", "requestId"}}` with a stable `code`. Money is integer USD cents in fields ending in `Minor` (' +
  MONEY_MEANING +
  ').';

function renderSteps(base: string): string[] {
  const out: string[] = [];
  const all = [DISCOVERY_STEP, ...QUICKSTART_STEPS];
  all.forEach((step, i) => {
    out.push(
      `${i}. ${step.title}: \`${step.method} ${step.path}\``,
      '',
      '```sh',
      curlOf(step, base),
      '```',
      '',
      step.then,
      '',
    );
  });
  return out;
}

/** `/llms.txt`'s section on connecting by URL, for an agent run by a host rather than on a machine of its own. */
function remoteMcpSection(base: string): string[] {
  return [
    '## Remote MCP (hosted agents)',
    '',
    `An agent host that adds MCP servers by URL connects to ${base}${MCP_PATH} (Streamable HTTP); no key is configured. ` +
      'It signs in with OAuth: the first call answers 401 naming the resource metadata, the host registers itself and opens an authorization page, ' +
      "and the account owner approves there (in Telegram, or with an owner key), setting the agent's limits. " +
      'The tools then act as the AGENT key that approval issued (scopes read, rent and manage, never billing), which the owner lists and revokes with the other agent keys; ' +
      "credits are the owner's to add (a rental refused for them says how, usually with a link to hand the owner). There is no signup over this connection, and `reveal_ssh_credentials` returns the private key only when called with `includePrivateKey`.",
    '',
    `- Protected resource metadata: ${base}${PROTECTED_RESOURCE_METADATA_PATH}`,
    `- Authorization server metadata: ${base}${AUTHORIZATION_SERVER_METADATA_PATH}`,
    '',
  ];
}

/** Where the client releases are listed (`{releases_url}/latest.json`). */
export function releasesManifestUrl(releasesUrl: string): string {
  return `${releasesUrl.replace(/\/+$/, '')}/${MANIFEST_FILE}`;
}

/** `/llms.txt`: plain text (markdown) for an LLM agent that has only this service's address. */
export function renderLlmsTxt(base: string, releasesUrl: string): string {
  const manifest = releasesManifestUrl(releasesUrl);
  return [
    '# GPU Rental API',
    '',
    '> Rent GPU machines by the hour over plain HTTP: no browser, no e-mail, no approval per rental.',
    '> A human funds credits once through a card link; the agent does everything else.',
    '',
    `Base URL: ${base}`,
    ENVELOPE_NOTE,
    '',
    '## Quickstart',
    '',
    ...renderSteps(base),
    '## Rules worth knowing',
    '',
    `- POST calls that create something need an \`Idempotency-Key\` header. ${IDEMPOTENCY_KEY_HINT} Retrying with the same key and body gives the same answer, never a second charge.`,
    `- ${BUDGET_RULE}`,
    `- ${GPU_FAMILY_INTENT}`,
    `- ${GPU_COUNT_IN_NAME}`,
    `- 401 is the same for every bad key. ${AUTH_HINT}`,
    '- 402 means add credits; 409 `CONCURRENCY_LIMIT_REACHED` means terminate something first; 429 carries `Retry-After`.',
    '- Agent keys see only their own rentals. Limits (per rental, total, concurrent, longest rental) are on the key.',
    '',
    '## Machines: what runs, for how long, waiting for capacity',
    '',
    '```sh',
    curlOf(MACHINE_EXAMPLE, base),
    '```',
    '',
    MACHINE_EXAMPLE.then,
    '',
    `- ${MACHINE_SETTINGS_RULE}`,
    `- ${LEASE_RULE}`,
    `- ${WAIT_FOR_CAPACITY_RULE}`,
    `- ${ACTIVE_MEANS}`,
    `- ${PHASES_RULE}`,
    '',
    '## Webhooks: checking a delivery',
    '',
    `Register one with \`POST /api/v1/webhook-endpoints\` (\`url\`, \`eventTypes\`); its \`secret\` is shown once. ${WEBHOOK_VERIFY_RULE}`,
    '',
    '```js',
    WEBHOOK_VERIFY_SNIPPET,
    '```',
    '',
    '## Clients',
    '',
    `\`gpr\` (a command line), \`gpr-mcp\` (an MCP server over stdio) and an agent skill are listed in ${manifest} with their URLs and SHA-256 hashes. Installed from there they call this service by default:`,
    '',
    '```sh',
    `npm install -g "$(curl -s ${manifest} | node -p 'JSON.parse(require("fs").readFileSync(0)).artifacts.cli.url')"`,
    '```',
    '',
    ...remoteMcpSection(base),
    '## Reference',
    '',
    `- OpenAPI document: ${base}/api/openapi.json`,
    `- Readable reference: ${base}/docs`,
    `- Index of links: ${base}/api/v1`,
    `- Remote MCP endpoint (OAuth): ${base}${MCP_PATH}`,
    `- Client releases: ${manifest}`,
    `- Teardown receipt keys (JWK Set; check a rental's \`GET /api/v1/rentals/{id}/receipt\` against them, e.g. \`gpr receipt verify <rental id>\`): ${base}${RECEIPT_KEYS_PATH}`,
    '',
  ].join('\n');
}

/** The quickstart as the OpenAPI `info.description` (CommonMark). */
export function renderOpenApiDescription(base: string, summary: string): string {
  return [
    summary,
    '',
    ENVELOPE_NOTE,
    '',
    '## Quickstart',
    '',
    ...renderSteps(base),
    `The same text for LLM agents: ${base}/llms.txt`,
  ].join('\n');
}
