import express, { Router, type Request, type Response } from 'express';
import type { Clock } from '../../clock.js';
import type { Config } from '../../config.js';
import { AppError } from '../../errors/app-error.js';
import type { Logger } from '../../logger.js';
import { continuePage, escapeHtml, failurePage, PAGE_HEADERS, renderPage } from '../billing/payment-pages.html.js';
import { formatUsd } from '../../vocabulary/money.js';
import { APPROVAL_LIMITS, MAX_RENTAL_SECONDS } from '../keys/key-limits.js';
import { describeRentalLength } from '../keys/rental-length.js';
import type { KeysService } from '../keys/keys.service.js';
import { ApprovalCsrf, approvalFormHtml, limitsFromForm, overOwnLimitsMessage } from './approval-form.js';
import { pollIntervalSeconds, type AgentsService } from './agents.service.js';
import { approvePayload, deepLink } from '../telegram/deep-links.js';

/** What the approval page reads and acts with. */
interface ApprovalPageDeps {
  agents: AgentsService;
  keys: KeysService;
  config: Config;
  clock: Clock;
  log: Logger;
  csrf: ApprovalCsrf;
  /** Where a remote MCP client's session continues once approved (its consent page). */
  clientContinueUrl: (interactionUid: string) => string;
}

type Session = Awaited<ReturnType<AgentsService['describeAuthorization']>>;
type Approved = Awaited<ReturnType<AgentsService['approveWithKey']>>;
type PageHandler = (deps: ApprovalPageDeps, req: Request, res: Response) => Promise<unknown>;

/**
 * The public page behind an approval URL. It shows what an agent is asking for and how long the
 * request stays open, and offers the ways to approve: the Telegram bot (deep link), a form where
 * the owner pastes an owner key (same-origin POST with a CSRF token, see approval-form.ts), and the
 * equivalent API call. Only an owner key approves, so a leaked link grants nothing.
 */
export function approvalPageRouter(services: {
  agents: AgentsService;
  keys: KeysService;
  config: Config;
  clock: Clock;
  logger: Logger;
  clientContinueUrl: (interactionUid: string) => string;
}): Router {
  const { agents, keys, config, clock, logger, clientContinueUrl } = services;
  const deps: ApprovalPageDeps = {
    agents,
    keys,
    config,
    clock,
    log: logger.child({ component: 'approval-page' }),
    csrf: new ApprovalCsrf(config.secrets.key, config.http.publicBaseUrl),
    clientContinueUrl,
  };
  const page = (handler: PageHandler) => (req: Request, res: Response) => guarded(deps, handler, req, res);
  const router = Router();
  router.get('/approve/:code', page(requestPage));
  router.post(
    '/approve/:code',
    express.urlencoded({ extended: false, limit: '4kb', parameterLimit: 10 }),
    page(approveFromForm),
  );
  return router;
}

/** Runs a page handler; an error it did not expect becomes the failure page (503 or 500). */
async function guarded(deps: ApprovalPageDeps, handler: PageHandler, req: Request, res: Response): Promise<void> {
  try {
    await handler(deps, req, res);
  } catch (err) {
    const page = failurePage(err, req.requestId, 'Nothing was approved.');
    if (page.status === 503) deps.log.warn({ err, requestId: req.requestId }, 'approval page unavailable');
    else deps.log.error({ err, requestId: req.requestId }, 'approval page failed');
    if (!res.headersSent) res.status(page.status).set(PAGE_HEADERS).set(page.headers).type('html').send(page.html);
  }
}

/** GET /approve/{code}: what the agent asks for, and the ways to approve it. */
async function requestPage({ agents, config, clock, csrf }: ApprovalPageDeps, req: Request, res: Response) {
  const code = String(req.params.code ?? '');
  const session = await agents.describeAuthorization(code);
  if (closed(res, session) || !session) return;
  const minutes = Math.max(1, Math.ceil((session.expiresAt.getTime() - clock.now().getTime()) / 60_000));
  const base = config.http.publicBaseUrl.replace(/\/+$/, '');
  const curl = [
    `curl -X POST ${base}/api/v1/agent-authorizations/approve \\`,
    `  -H "Authorization: Bearer $OWNER_KEY" -H 'Content-Type: application/json' \\`,
    `  -d '{"approvalCode": "${code}", "maxPerRentalMinor": 2000, "budgetLimitMinor": 10000, "maxConcurrentDeployments": 1}'`,
  ].join('\n');
  const telegram = config.telegram.botUsername
    ? `<p class="actions"><a href="${escapeHtml(deepLink(config.telegram.botUsername, approvePayload(code)))}" style="display:inline-block;padding:.75rem 1.5rem;border-radius:6px;background:var(--accent);color:var(--card);font-weight:600;text-decoration:none">Approve in Telegram</a></p>
<p class="muted">The bot asks you for the limits, then approves.</p>`
    : '<p class="muted">The Telegram bot is not configured on this service; approve with the API call below.</p>';
  const who = session.requestedName
    ? `An AI agent that calls itself <strong>${escapeHtml(session.requestedName)}</strong> is asking`
    : 'An AI agent is asking';
  const body = `<p>${who} for a key to rent GPU machines on your account, paid from your compute credits. It will never see your own credentials, and you can revoke its key at any time.</p>
<p>You decide its limits when you approve:</p>
<dl>
<dt>Per rental</dt><dd>the most one rental may cost (at least ${formatUsd(APPROVAL_LIMITS.minimums.maxPerRentalMinor)})</dd>
<dt>In total</dt><dd>the most the key may spend over its life (at least ${formatUsd(APPROVAL_LIMITS.minimums.budgetLimitMinor)})</dd>
<dt>At once</dt><dd>how many machines it may run at the same time (at least ${APPROVAL_LIMITS.minimums.maxConcurrentDeployments})</dd>
<dt>Longest rental</dt><dd>optional: how long one rental may run at most (${describeRentalLength(MAX_RENTAL_SECONDS.minimum)} to ${describeRentalLength(MAX_RENTAL_SECONDS.maximum)})</dd>
<dt>Idle machines</dt><dd>optional: end a rental whose GPUs stay idle this many minutes (after a warning)</dd>
<dt>Access</dt><dd>rent, read and terminate its own rentals; never add credits</dd>
</dl>
<p><strong>Expires ${escapeHtml(utc(session.expiresAt))}</strong> (in about ${minutes} minute${minutes === 1 ? '' : 's'}). Only approve a request you started yourself.</p>
${telegram}
${approvalFormHtml(code, csrf.issue(res, code))}
<p>Or from a shell, with an owner key (limits in cents):</p>
<pre style="white-space:pre-wrap;word-break:break-all">${escapeHtml(curl)}</pre>`;
  return send(res, 200, 'An agent asks for access', body);
}

/** POST /approve/{code}: the form's approval with an owner key, or the form again with what to fix. */
async function approveFromForm(
  { agents, keys, config, csrf, clientContinueUrl }: ApprovalPageDeps,
  req: Request,
  res: Response,
) {
  const code = String(req.params.code ?? '');
  if (!csrf.verify(req, code)) {
    return send(
      res,
      403,
      'Approval not accepted',
      '<p>This approval did not come from the approval page in your browser, so nothing was approved. Open the approval link again and use the form there.</p>',
    );
  }
  const session = await agents.describeAuthorization(code);
  if (closed(res, session) || !session) return;
  const retry = (status: number, message: string) =>
    send(
      res,
      status,
      'An agent asks for access',
      `<p>Nothing was approved yet.</p>${approvalFormHtml(code, csrf.issue(res, code), message)}`,
    );
  const parsed = limitsFromForm(req.body);
  if ('error' in parsed) return retry(422, parsed.error);
  const key = typeof req.body?.ownerKey === 'string' ? req.body.ownerKey.trim() : '';
  let approved: Approved;
  let principal: Awaited<ReturnType<KeysService['authenticate']>> | undefined;
  try {
    principal = await keys.authenticate(`Bearer ${key}`);
    approved = await agents.approveWithKey(principal, code, parsed.limits);
  } catch (err) {
    if (!(err instanceof AppError) || err.code === 'UNAVAILABLE') throw err;
    if (err.code === 'AGENT_SETUP_INVALID' || err.code === 'NOT_FOUND')
      return closed(res, await agents.describeAuthorization(code));
    const message =
      err.code === 'UNAUTHENTICATED'
        ? 'That owner key was not accepted: check that it was pasted completely and has not been revoked.'
        : err.code === 'KEY_LIMIT_EXCEEDED' && principal
          ? overOwnLimitsMessage(parsed.limits, principal.key)
          : err.message;
    return retry(err.status, message);
  }
  if (session.clientInteraction) {
    const next = clientContinueUrl(session.clientInteraction);
    return res
      .status(200)
      .set(PAGE_HEADERS)
      .type('html')
      .send(continuePage('Agent approved', 'Approved.', next));
  }
  return send(
    res,
    200,
    'Agent approved',
    approvedBody(approved, pollIntervalSeconds(config.agents.setupRatePerMinute)),
  );
}

/** The approved page: when the agent picks up its key (within `waitSeconds`), and the limits it got. */
function approvedBody(approved: Approved, waitSeconds: number): string {
  return `<p>Your agent's request is approved. It picks up its key the next time it checks, within about ${waitSeconds} seconds, and before ${escapeHtml(utc(new Date(approved.exchangeBefore)))}.</p>
<dl>
<dt>Per rental</dt><dd>${formatUsd(approved.maxPerRentalMinor)}</dd>
<dt>In total</dt><dd>${formatUsd(approved.budgetLimitMinor)}</dd>
<dt>At once</dt><dd>${approved.maxConcurrentDeployments}</dd>
<dt>Longest rental</dt><dd>${describeRentalLength(approved.maxRentalSeconds)}</dd>
<dt>Idle machines</dt><dd>${approved.idleTerminateMinutes === null ? 'never ended' : `ended after ${approved.idleTerminateMinutes} idle minute${approved.idleTerminateMinutes === 1 ? '' : 's'}`}</dd>
</dl>
<p class="muted">You can revoke its key at any time: GET /api/v1/agent-keys lists it, DELETE /api/v1/agent-keys/{id} revokes it (or /agents in the Telegram bot).</p>`;
}

function send(res: Response, status: number, title: string, body: string): Response {
  return res.status(status).set(PAGE_HEADERS).type('html').send(renderPage({ title, body }));
}

/** The session's state as a page, or null when it is pending and the form applies. */
function closed(res: Response, session: Session): Response | null {
  if (!session) {
    return send(
      res,
      404,
      'Request not found',
      '<p>This approval link is not valid. Check that it was copied completely, or ask your agent to start a new request.</p>',
    );
  }
  if (session.status === 'EXPIRED') {
    return send(
      res,
      410,
      'This request has expired',
      `<p>This agent's request expired at ${escapeHtml(utc(session.expiresAt))} and can no longer be approved. Ask your agent to start a new one; it only takes a second.</p>`,
    );
  }
  if (session.status !== 'PENDING') {
    return send(
      res,
      409,
      'Already approved',
      "<p>This request has already been approved, so there is nothing left to do here. You can see and revoke your agents' keys with GET /api/v1/agent-keys, or in the Telegram bot with /agents.</p>",
    );
  }
  return null;
}

function utc(d: Date): string {
  return `${d.toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}
