import { Router, type Request, type Response } from 'express';
import type { Clock } from '../../clock.js';
import { AppError } from '../../errors/app-error.js';
import { normaliseId } from '../../ids.js';
import type { Logger } from '../../logger.js';
import { isPayable } from './card-orders.js';
import type { Checkout } from './checkout.entity.js';
import { LocalPaymentProvider } from './local-payment-provider.js';
import { formatUsd } from '../../vocabulary/money.js';
import { escapeHtml, failurePage, PAGE_HEADERS, renderPage } from './payment-pages.html.js';
import type { Payments } from './payments.js';

/** What the payment pages read and act with. */
interface PageDeps {
  payments: Payments;
  clock: Clock;
  log: Logger;
}

type PageHandler = (deps: PageDeps, req: Request, res: Response) => Promise<void>;

/**
 * Pages a human sees around a card payment: the return pages after the provider's hosted
 * checkout (success, cancelled) and, without a Stripe key, the development payment page itself.
 */
export function paymentPagesRouter(services: { payments: Payments; clock: Clock; logger: Logger }): Router {
  const { payments, clock, logger } = services;
  const deps: PageDeps = { payments, clock, log: logger.child({ component: 'payment-pages' }) };
  const router = Router();
  const page = (handler: PageHandler) => (req: Request, res: Response) => guarded(deps, handler, req, res);
  // The development checkout: stands in for Stripe's hosted page when no Stripe key is set.
  router.get('/pay/:checkoutId', page(devCheckoutPage));
  router.post('/pay/:checkoutId', page(devCheckoutPayment));
  router.get('/checkout/:checkoutId/success', page(returnedPage));
  router.get('/checkout/:checkoutId/cancel', page(cancelledPage));
  return router;
}

/** Runs a page handler; an error it did not expect becomes the failure page (503 or 500). */
async function guarded(deps: PageDeps, handler: PageHandler, req: Request, res: Response): Promise<void> {
  try {
    await handler(deps, req, res);
  } catch (err) {
    const page = failurePage(err, req.requestId, 'Nothing was charged by this page.');
    if (page.status === 503)
      deps.log.warn({ err, requestId: req.requestId, path: req.path }, 'payment page unavailable');
    else deps.log.error({ err, requestId: req.requestId, path: req.path }, 'payment page failed');
    if (!res.headersSent) {
      res.set(page.headers);
      send(res, page.status, page.html);
    }
  }
}

/** GET /pay/{id}: the development payment page, or why this checkout cannot be paid. */
async function devCheckoutPage(deps: PageDeps, req: Request, res: Response): Promise<void> {
  const provider = localProvider(deps.payments);
  const c = await loadCheckout(deps.payments, req);
  if (!provider || !c || c.provider !== 'local') return notFound(res);
  const what = escapeHtml(await subject(deps.payments, c));
  const amount = formatUsd(c.amountMinor);
  if (c.status === 'PAID') {
    return send(
      res,
      200,
      renderPage({
        title: 'Already paid',
        devBanner: true,
        body: `<p>This payment of ${amount} for ${what} is complete. Nothing more to do.</p><p><a href="/checkout/${c.id}/success">See the confirmation</a></p>`,
      }),
    );
  }
  if (isExpired(c, deps.clock) || c.status === 'FAILED' || c.status === 'CREATING') return expiredLinkPage(res);
  if (await orderClosed(deps, c)) return closedOrderPage(res);
  send(
    res,
    200,
    renderPage({
      title: 'Pay for compute',
      devBanner: true,
      body: `<p class="amount" id="amount">${amount}</p>
<dl>
<dt>For</dt><dd>${what}</dd>
<dt>Reference</dt><dd>${c.id}</dd>
${c.expiresAt ? `<dt>Link valid until</dt><dd>${escapeHtml(c.expiresAt.toISOString().replace('T', ' ').slice(0, 16))} UTC</dd>` : ''}
</dl>
<form method="post" action="/pay/${c.id}">
<div class="actions">
<button type="submit">Pay ${amount}</button>
<a href="/checkout/${c.id}/cancel">Cancel</a>
</div>
</form>`,
    }),
  );
}

/** POST /pay/{id}: the development payment, delivered as the provider's signed paid event. */
async function devCheckoutPayment(deps: PageDeps, req: Request, res: Response): Promise<void> {
  const provider = localProvider(deps.payments);
  const c = await loadCheckout(deps.payments, req);
  if (!provider || !c || c.provider !== 'local') return notFound(res);
  if (c.status === 'PAID') return void res.redirect(303, `/checkout/${c.id}/success`);
  if (c.status !== 'OPEN' || isExpired(c, deps.clock)) return expiredLinkPage(res);
  // A cancellation landing after this check is caught where the payment is applied: refunded.
  if (await orderClosed(deps, c)) return closedOrderPage(res);
  // The signed event goes to this very process over the socket the browser reached, never to a
  // host named by the request: the body is a valid payment proof.
  const host = req.socket.localAddress ?? '127.0.0.1';
  const webhookUrl = `http://${host.includes(':') ? `[${host}]` : host}:${req.socket.localPort}/api/v1/webhooks/stripe`;
  const status = await provider.deliverPaidEvent(c, webhookUrl);
  if (status === 503) throw new AppError('UNAVAILABLE', 'the payment event could not be recorded now');
  if (status < 200 || status >= 300) {
    deps.log.error({ checkoutId: c.id, status }, 'development payment event was not accepted');
    return send(
      res,
      502,
      renderPage({
        title: 'Payment not recorded',
        devBanner: true,
        body: '<p>The payment could not be recorded. Nothing was credited. Please try again.</p>',
      }),
    );
  }
  res.redirect(303, `/checkout/${c.id}/success`);
}

/** GET /checkout/{id}/success: where the hosted checkout returns after a payment. */
async function returnedPage(deps: PageDeps, req: Request, res: Response): Promise<void> {
  const c = await loadCheckout(deps.payments, req);
  if (!c) return notFound(res);
  const amount = formatUsd(c.amountMinor);
  if (c.status === 'PAID' && c.refundStatus !== null) {
    const state = c.refundStatus === 'SUCCEEDED' ? 'has been refunded to your card' : 'is being refunded to your card';
    return send(
      res,
      200,
      renderPage({
        title: 'Payment refunded',
        body: `<p>Your payment of ${amount} arrived after this order had been cancelled or had ended, so no machine was started and the payment ${state}. Refunds usually reach the card within 5 to 10 business days.</p><p>You can close this page.</p>`,
      }),
    );
  }
  if (c.status === 'PAID') {
    const body =
      c.purpose === 'TOPUP'
        ? `<p>Your payment of ${amount} was received and ${amount} of compute credits were added to the account.</p><p>You can close this page.</p>`
        : `<p>Your payment of ${amount} was received. The GPU rental is being prepared now; whoever ordered it can follow its progress.</p><p>You can close this page.</p>`;
    return send(res, 200, renderPage({ title: 'Payment received', body }));
  }
  if (c.status === 'EXPIRED' || c.status === 'FAILED') {
    return send(
      res,
      200,
      renderPage({
        title: 'Payment not completed',
        body: '<p>This payment did not go through and the link has expired. Nothing was charged. Ask for a new payment link to try again.</p>',
      }),
    );
  }
  send(
    res,
    200,
    renderPage({
      title: 'Confirming your payment',
      refreshSeconds: 5,
      body: `<p>Thank you. We are waiting for the card processor to confirm your payment of ${amount}. This usually takes a few seconds; this page refreshes by itself.</p><p class="muted">You can also close this page: ${c.purpose === 'TOPUP' ? 'the credits are added' : 'the rental starts'} as soon as the payment is confirmed.</p>`,
    }),
  );
}

/** GET /checkout/{id}/cancel: where the hosted checkout returns when the payer cancels. */
async function cancelledPage(deps: PageDeps, req: Request, res: Response): Promise<void> {
  const c = await loadCheckout(deps.payments, req);
  if (!c) return notFound(res);
  if (c.status === 'PAID') {
    return send(
      res,
      200,
      renderPage({
        title: 'Already paid',
        body: `<p>This payment of ${formatUsd(c.amountMinor)} was already completed, so nothing was cancelled.</p><p>You can close this page.</p>`,
      }),
    );
  }
  const again =
    c.status === 'OPEN' && !isExpired(c, deps.clock) && c.checkoutUrl
      ? `<p>Changed your mind? <a href="${escapeHtml(c.checkoutUrl)}">Return to the payment page</a>${c.expiresAt ? ` (it works until ${escapeHtml(c.expiresAt.toISOString().replace('T', ' ').slice(0, 16))} UTC)` : ''}.</p>`
      : '<p>To pay later, ask for a new payment link.</p>';
  send(
    res,
    200,
    renderPage({
      title: 'Payment cancelled',
      body: `<p>You cancelled the payment. Nothing was charged.</p>${again}<p>You can close this page.</p>`,
    }),
  );
}

function send(res: Response, status: number, html: string): void {
  res.status(status).set(PAGE_HEADERS).type('html').send(html);
}

function notFound(res: Response): void {
  send(
    res,
    404,
    renderPage({
      title: 'Payment not found',
      body: '<p>We could not find this payment. Check that the link is complete, or ask for a new one.</p>',
    }),
  );
}

function expiredLinkPage(res: Response): void {
  send(
    res,
    410,
    renderPage({
      title: 'This payment link has expired',
      devBanner: true,
      body: '<p>This link can no longer be paid. Nothing was charged. Ask for a new payment link.</p>',
    }),
  );
}

function closedOrderPage(res: Response): void {
  send(
    res,
    410,
    renderPage({
      title: 'This order is closed',
      devBanner: true,
      body: '<p>This order was cancelled or has ended, so it can no longer be paid. Nothing was charged.</p>',
    }),
  );
}

/** The checkout a page's URL names, or null when its id is not one. */
async function loadCheckout(payments: Payments, req: Request): Promise<Checkout | null> {
  const id = normaliseId(String(req.params.checkoutId ?? ''));
  return id ? payments.sessions.find(id) : null;
}

/** The development provider when it is the one configured: only it has a payment page here. */
function localProvider(payments: Payments): LocalPaymentProvider | null {
  return payments.provider instanceof LocalPaymentProvider ? payments.provider : null;
}

function isExpired(c: Checkout, clock: Clock): boolean {
  return (
    c.status === 'EXPIRED' ||
    (c.status === 'OPEN' && c.expiresAt !== null && c.expiresAt.getTime() <= clock.now().getTime())
  );
}

/** A card order cancelled (or otherwise ended) before payment takes no payment on this page. */
async function orderClosed(deps: PageDeps, c: Checkout): Promise<boolean> {
  return c.purpose === 'ORDER' && c.orderId !== null && !isPayable(await deps.payments.sessions.orderState(c.orderId));
}

/** What is being bought, in words. */
async function subject(payments: Payments, c: Checkout): Promise<string> {
  if (c.purpose === 'TOPUP') return 'Compute credits';
  const hours = c.orderId ? await payments.cardOrders.hours(c.orderId) : null;
  return hours ? `GPU rental, ${hours} hour${hours === 1 ? '' : 's'}` : 'GPU rental';
}
