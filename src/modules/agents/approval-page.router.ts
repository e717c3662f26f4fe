import { Router, type Request, type Response } from 'express';
import { escapeHtml, PAGE_HEADERS, renderPage } from '../billing/payment-pages.html.js';
import { formatUsd } from '../billing/money.js';
import type { AgentsService } from './agents.service.js';
import type { Clock } from '../../clock.js';
import type { Config } from '../../config.js';
import type { Logger } from '../../logger.js';
import { APPROVAL_LIMITS } from '../keys/key-limits.js';

/**
 * The public page behind an approval URL. It shows what an agent is asking for and how long the
 * request stays open, and offers the two ways to approve: the Telegram bot (deep link) and the
 * equivalent API call with an owner key. It changes nothing itself, so a leaked link grants nothing.
 */
export function approvalPageRouter(services: { agents: AgentsService; config: Config; clock: Clock; logger: Logger }): Router {
  const router = Router();
  const { config, clock, logger } = services;
  const log = logger.child({ component: 'approval-page' });
  const send = (res: Response, status: number, title: string, body: string) =>
    res.status(status).set(PAGE_HEADERS).type('html').send(renderPage({ title, body }));

  router.get('/approve/:code', async (req: Request, res: Response) => {
    try {
      const code = String(req.params.code ?? '');
      const session = await services.agents.describeAuthorization(code);
      if (!session) {
        return send(res, 404, 'Request not found', '<p>This approval link is not valid. Check that it was copied completely, or ask your agent to start a new request.</p>');
      }
      if (session.status === 'EXPIRED') {
        return send(res, 410, 'This request has expired', `<p>This agent's request expired at ${escapeHtml(utc(session.expiresAt))} and can no longer be approved. Ask your agent to start a new one; it only takes a second.</p>`);
      }
      if (session.status !== 'PENDING') {
        return send(res, 409, 'Already approved', '<p>This request has already been approved, so there is nothing left to do here. You can see and revoke your agents\' keys in the Telegram bot with /agents.</p>');
      }
      const minutes = Math.max(1, Math.ceil((session.expiresAt.getTime() - clock.now().getTime()) / 60_000));
      const base = config.publicBaseUrl.replace(/\/+$/, '');
      const curl = [
        `curl -X POST ${base}/api/v1/agent-authorizations/approve \\`,
        `  -H "Authorization: Bearer $OWNER_KEY" -H 'Content-Type: application/json' \\`,
        `  -d '{"approvalCode": "${code}", "maxPerRentalMinor": 2000, "budgetLimitMinor": 10000, "maxConcurrentDeployments": 1}'`,
      ].join('\n');
      const telegram = config.telegramBotUsername
        ? `<p class="actions"><a href="https://t.me/${encodeURIComponent(config.telegramBotUsername)}?start=approve_${encodeURIComponent(code)}" style="display:inline-block;padding:.75rem 1.5rem;border-radius:6px;background:var(--accent);color:var(--card);font-weight:600;text-decoration:none">Approve in Telegram</a></p>
<p class="muted">The bot asks you for the three limits, then approves.</p>`
        : '<p class="muted">The Telegram bot is not configured on this service; approve with the API call below.</p>';
      const body = `<p>An AI agent is asking for a key to rent GPU machines on your account, paid from your compute credits. It will never see your own credentials, and you can revoke its key at any time.</p>
<p>You decide its limits when you approve:</p>
<dl>
<dt>Per rental</dt><dd>the most one rental may cost (at least ${formatUsd(APPROVAL_LIMITS.minimums.maxPerRentalMinor)})</dd>
<dt>In total</dt><dd>the most the key may spend over its life (at least ${formatUsd(APPROVAL_LIMITS.minimums.budgetLimitMinor)})</dd>
<dt>At once</dt><dd>how many machines it may run at the same time (at least ${APPROVAL_LIMITS.minimums.maxConcurrentDeployments})</dd>
<dt>Access</dt><dd>rent, read and terminate its own rentals; never add credits</dd>
</dl>
<p><strong>Expires ${escapeHtml(utc(session.expiresAt))}</strong> (in about ${minutes} minute${minutes === 1 ? '' : 's'}). Only approve a request you started yourself.</p>
${telegram}
<p>Or with an owner key (limits in cents):</p>
<pre style="white-space:pre-wrap;word-break:break-all">${escapeHtml(curl)}</pre>`;
      return send(res, 200, 'An agent asks for access', body);
    } catch (err) {
      log.error({ err, requestId: req.requestId }, 'approval page failed');
      if (!res.headersSent) send(res, 500, 'Something went wrong', `<p>Something went wrong on our side. Please reload; if it keeps failing, quote request <code>${escapeHtml(req.requestId)}</code>.</p>`);
    }
  });
  return router;
}

function utc(d: Date): string {
  return `${d.toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}
