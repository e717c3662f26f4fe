import { createHmac } from 'node:crypto';
import express, { Router, type Request, type Response } from 'express';
import type { Config } from '../../config.js';
import { AppError } from '../../errors/app-error.js';
import { clientAddress } from '../../http/client-address.js';
import type { Logger } from '../../logger.js';
import { continuePage, escapeHtml, failurePage, PAGE_HEADERS, renderPage } from '../billing/payment-pages.html.js';
import { ApprovalCsrf, approvalFormHtml } from '../agents/approval-form.js';
import { SETUP_SCOPES, type AgentsService, type AuthorizationView } from '../agents/agents.service.js';
import { APPROVAL_CODE_TAG } from '../keys/tokens.js';
import { agentName } from '../keys/key-name.js';
import { approvePayload, deepLink } from '../telegram/deep-links.js';
import { CONSENT_PATH, type AuthorizationServer } from './authorization-server.js';

interface ConsentDeps {
  oauth: AuthorizationServer;
  agents: AgentsService;
  config: Config;
  log: Logger;
  /** Guards the refuse button (its cookie is the consent page's). */
  csrf: ApprovalCsrf;
  /** Guards the owner-key form, which posts to the approval page. */
  approvalCsrf: ApprovalCsrf;
  approvalSecret: Buffer;
}

/** The scopes a client may be granted: the key's, and refresh tokens (`offline_access`). */
const GRANTABLE = new Set<string>(['openid', 'offline_access', ...SETUP_SCOPES]);

/** Seconds between the pending page's reloads: an approval in Telegram shows within this. */
const RELOAD_SECONDS = 3;

/** The consent page's address for interaction `uid`. */
export const consentUrl = (uid: string) => `${CONSENT_PATH}/${encodeURIComponent(uid)}`;

/**
 * The approval code of the session interaction `uid` opens, derived from the uid with a key of
 * the secrets key: every api process finds the same one, and nothing but its hash is stored.
 */
function approvalCodeFor(secret: Buffer, uid: string): string {
  return `${APPROVAL_CODE_TAG}_${createHmac('sha256', secret).update(uid).digest('base64url')}`;
}

/**
 * The consent page of a remote MCP client's `/authorize`: an agent authorization session of its
 * own, which the owner approves as any other (in Telegram through the deep link, or with an
 * owner key in the form, setting the limits), or refuses. It reloads while pending; once the
 * session is approved it issues the AGENT key, grants the client the resource for it and sends
 * the browser back to the client with the code. Refusal and expiry send it back with
 * `access_denied`.
 */
export function consentRouter(services: {
  oauth: AuthorizationServer;
  agents: AgentsService;
  config: Config;
  logger: Logger;
}): Router {
  const { config } = services;
  const deps: ConsentDeps = {
    oauth: services.oauth,
    agents: services.agents,
    config,
    log: services.logger.child({ component: 'oauth-consent' }),
    csrf: new ApprovalCsrf(config.secrets.key, config.http.publicBaseUrl, CONSENT_PATH),
    approvalCsrf: new ApprovalCsrf(config.secrets.key, config.http.publicBaseUrl),
    approvalSecret: createHmac('sha256', config.secrets.key).update('oauth-approval-code').digest(),
  };
  const router = Router();
  router.get(`${CONSENT_PATH}/:uid`, (req, res) => guarded(deps, consentPage, req, res));
  router.post(
    `${CONSENT_PATH}/:uid/refuse`,
    express.urlencoded({ extended: false, limit: '2kb', parameterLimit: 4 }),
    (req, res) => guarded(deps, refuse, req, res),
  );
  return router;
}

type Handler = (deps: ConsentDeps, req: Request, res: Response) => Promise<unknown>;

async function guarded(deps: ConsentDeps, handler: Handler, req: Request, res: Response): Promise<void> {
  try {
    await handler(deps, req, res);
  } catch (err) {
    const page = failurePage(err, req.requestId, 'Nothing was authorized.');
    deps.log.error({ err, requestId: req.requestId }, 'consent page failed');
    if (!res.headersSent) res.status(page.status).set(PAGE_HEADERS).set(page.headers).type('html').send(page.html);
  }
}

function send(res: Response, status: number, title: string, body: string, refresh?: number): Response {
  return res
    .status(status)
    .set(PAGE_HEADERS)
    .type('html')
    .send(renderPage({ title, body, ...(refresh ? { refreshSeconds: refresh } : {}) }));
}

/** The interaction this browser is in, when it is the one the path names; null when it ended or belongs elsewhere. */
async function interactionOf(deps: ConsentDeps, req: Request, res: Response) {
  try {
    const details = await deps.oauth.provider.interactionDetails(req, res);
    return details.uid === req.params.uid ? details : null;
  } catch {
    return null;
  }
}

const gone = (res: Response) =>
  send(
    res,
    410,
    'This authorization is no longer open',
    '<p>This connection request has ended here: it was completed, refused or expired, or it was opened in another browser. If you approved it from another device, the page where it started carries on by itself. Otherwise start the connection again from your app.</p>',
  );

/** The OAuth error of a session the service would not open, by the refusal's code. */
const NOT_OPENED: Record<string, string> = {
  AGENTS_DISABLED: 'access_denied',
  RATE_LIMITED: 'temporarily_unavailable',
};

/** What the OAuth error of a session that ended without approval says. */
const ENDED: Partial<Record<AuthorizationView, string>> = {
  EXPIRED: 'The account owner did not approve the connection within 10 minutes.',
  REVOKED: 'The account owner refused the connection (or revoked the key that approved it).',
};

/** GET: opens the session on the first visit, shows it while pending, and finishes the interaction once it is decided. */
async function consentPage(deps: ConsentDeps, req: Request, res: Response) {
  const { oauth, agents, config, csrf } = deps;
  const interaction = await interactionOf(deps, req, res);
  if (!interaction) return gone(res);
  const uid = interaction.uid;
  const clientId = String(interaction.params.client_id);
  const client = await oauth.provider.Client.find(clientId);
  if (!client) return gone(res);
  const approvalCode = approvalCodeFor(deps.approvalSecret, uid);
  let status = await agents.clientSession(uid);
  if (status === null) {
    try {
      await agents.beginAuthorization(
        clientAddress(req),
        { name: displayName(client.clientName) ?? undefined },
        { interactionUid: uid, approvalCode },
      );
    } catch (err) {
      // The same page loaded twice at once: the other load opened it (the uid is unique).
      if (!(err instanceof AppError) && (await agents.clientSession(uid)) !== null) return consentPage(deps, req, res);
      // What the service refuses to open (agents switched off, too many requests from this
      // address) the client hears as the OAuth error it can act on.
      if (!(err instanceof AppError) || !(err.code in NOT_OPENED)) throw err;
      return oauth.provider.interactionFinished(
        req,
        res,
        { error: NOT_OPENED[err.code], error_description: err.message },
        { mergeWithLastSubmission: false },
      );
    }
    status = 'PENDING';
  }
  if (status === 'APPROVED' || status === 'EXCHANGED') {
    const issued = await agents.issueForClient(uid);
    if (issued.keyId) {
      const grant = new oauth.provider.Grant({ accountId: issued.keyId, clientId });
      grant.addResourceScope(oauth.resource, SETUP_SCOPES.join(' '));
      // The scopes the client asked for, of those there are: the token's own power is the key's.
      const asked = String(interaction.params.scope ?? '')
        .split(' ')
        .filter((scope) => GRANTABLE.has(scope));
      if (asked.length) grant.addOIDCScope(asked.join(' '));
      const grantId = await grant.save();
      return oauth.provider.interactionFinished(
        req,
        res,
        { login: { accountId: issued.keyId }, consent: { grantId } },
        { mergeWithLastSubmission: false },
      );
    }
    status = issued.status;
  }
  const ended = ENDED[status];
  if (ended) {
    return oauth.provider.interactionFinished(
      req,
      res,
      { error: 'access_denied', error_description: ended },
      { mergeWithLastSubmission: false },
    );
  }
  const body = pendingBody(client, String(interaction.params.redirect_uri ?? ''), approvalCode, uid);
  return send(res, 200, 'An app asks to rent GPUs for you', body, RELOAD_SECONDS);

  function pendingBody(c: Client, redirect: string, code: string, id: string): string {
    const name = displayName(c.clientName);
    const fromDocument = (c as { clientIdMetadataDocument?: boolean }).clientIdMetadataDocument === true;
    const who = name
      ? `<strong>${escapeHtml(name)}</strong> <span class="muted">(the name it gives itself)</span>`
      : 'An app that gives no name';
    const where = fromDocument
      ? `<p>Its description is published at <code>${escapeHtml(c.clientId)}</code>, which this service fetched: the app is run from <strong>${escapeHtml(new URL(c.clientId).host)}</strong>.</p>`
      : `<p>It registered itself with this service a moment ago${c.clientUri ? `, saying it comes from <code>${escapeHtml(c.clientUri)}</code>` : ''}: <strong>unverified</strong>. Approve only a connection you started yourself.</p>`;
    const telegram = config.telegram.botUsername
      ? `<p class="actions"><a href="${escapeHtml(deepLink(config.telegram.botUsername, approvePayload(code)))}" style="display:inline-block;padding:.75rem 1.5rem;border-radius:6px;background:var(--accent);color:var(--card);font-weight:600;text-decoration:none">Approve in Telegram</a></p>
<p class="muted">The bot asks you for the limits, then approves; this page continues by itself.</p>`
      : '';
    return `<p>${who} asks to act as an AI agent on your account: to rent GPU machines paid from your compute credits, within limits you set now. It never sees your own credentials, never adds credits, and you can revoke it at any time (/agents in the Telegram bot, or GET /api/v1/agent-keys).</p>
${where}
<p class="muted">After approval you are sent back to <code>${escapeHtml(redirect)}</code>.</p>
<p>Approval code: <code>${escapeHtml(code)}</code></p>
${telegram}
${approvalFormHtml(code, deps.approvalCsrf.issue(res, code))}
<form method="post" action="${escapeHtml(`${consentUrl(id)}/refuse`)}"><input type="hidden" name="csrf" value="${escapeHtml(csrf.issue(res, id))}"><p class="actions"><button type="submit">Refuse</button></p></form>`;
  }
}

type Client = NonNullable<Awaited<ReturnType<AuthorizationServer['provider']['Client']['find']>>>;

/** POST refuse: the session can no longer be approved; the page that follows sends the client its error. */
async function refuse(deps: ConsentDeps, req: Request, res: Response) {
  const uid = String(req.params.uid ?? '');
  if (!deps.csrf.verify(req, uid)) {
    return send(
      res,
      403,
      'Not refused',
      '<p>This request did not come from the consent page in your browser. Open the page again and use its button.</p>',
    );
  }
  await deps.agents.refuseClient(uid);
  return res
    .status(200)
    .set(PAGE_HEADERS)
    .type('html')
    .send(continuePage('Connection refused', 'Refused: nothing was authorized.', consentUrl(uid)));
}

/** A client's self-given name as shown and stored: the rule for agent names, or none when it breaks it. */
function displayName(raw: unknown): string | null {
  if (typeof raw !== 'string') return null;
  try {
    return agentName(raw.replace(/[\x00-\x1f\x7f]/g, ' ').slice(0, 100));
  } catch {
    return null;
  }
}
