import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { simulatedLatency } from './simulated-latency.js';

/** A Refund as Stripe's API documents it (the fields this service and its tests use). */
export interface FakeRefund {
  id: string;
  object: 'refund';
  amount: number;
  charge: string;
  created: number;
  currency: string;
  metadata: Record<string, string>;
  payment_intent: string;
  reason: string | null;
  status: 'pending' | 'succeeded' | 'failed' | 'canceled' | 'requires_action';
}

/** A Checkout Session as Stripe's API documents it (the fields this service and its tests use). */
export interface FakeCheckoutSession {
  id: string;
  object: 'checkout.session';
  amount_subtotal: number;
  amount_total: number;
  cancel_url: string | null;
  client_reference_id: string | null;
  created: number;
  currency: string;
  customer: null;
  customer_email: string | null;
  expires_at: number;
  livemode: false;
  metadata: Record<string, string>;
  mode: 'payment' | 'setup' | 'subscription';
  payment_intent: string | null;
  payment_status: 'paid' | 'unpaid' | 'no_payment_required';
  status: 'open' | 'complete' | 'expired';
  success_url: string | null;
  url: string | null;
}

export interface RecordedRequest {
  method: string;
  path: string;
  /** Form-decoded body (nested objects and arrays rebuilt from bracket notation). */
  params: Record<string, unknown>;
  idempotencyKey: string | null;
  authorization: string | null;
  stripeVersion: string | null;
  /** What the fake answered (0 when it dropped the connection). */
  status: number;
}

interface StoredResult {
  method: string;
  path: string;
  paramsHash: string;
  status: number;
  body: unknown;
}

type Reply = { status: number; body: unknown };

export interface FakeStripeOptions {
  /** The only API key accepted; any other gets Stripe's 401. */
  secretKey: string;
}

/**
 * A local stand-in for the parts of Stripe's API this service uses, spoken to by the real SDK:
 * POST /v1/checkout/sessions, GET /v1/checkout/sessions/:id, POST /v1/checkout/sessions/:id/expire,
 * POST /v1/refunds and GET /v1/refunds,
 * with form-encoded bodies, Stripe-shaped errors and Stripe's Idempotency-Key rules (same key and
 * parameters replay the first result; different parameters are an idempotency_error; a key whose
 * first request is still running is a 409 the SDK retries).
 */
export class FakeStripeServer {
  readonly requests: RecordedRequest[] = [];
  readonly sessions = new Map<string, FakeCheckoutSession>();
  readonly refunds: FakeRefund[] = [];
  /** When set, refunds are refused as Stripe refuses them for a card that cannot take one. */
  refuseRefunds = false;
  /**
   * How many of the next refund requests Stripe turns away with 429 before executing them (its
   * rate limiter): a transient failure that, like Stripe's, leaves the idempotency key unused.
   */
  rateLimitedRefunds = 0;
  /** Stripe's time to answer each API request, simulated: concurrent requests then overlap as they do against Stripe. */
  simulatedLatencyMs = 0;
  private dropsLeft = 0;
  private dropPath: string | null = null;
  private readonly idempotent = new Map<string, StoredResult>();
  private readonly inFlight = new Set<string>();
  private server!: Server;
  url = '';

  private constructor(private readonly options: FakeStripeOptions) {}

  static async start(options: FakeStripeOptions): Promise<FakeStripeServer> {
    const fake = new FakeStripeServer(options);
    fake.server = createServer((req, res) => void fake.handle(req, res));
    await new Promise<void>((resolve) => fake.server.listen(0, '127.0.0.1', resolve));
    fake.url = `http://127.0.0.1:${(fake.server.address() as AddressInfo).port}`;
    return fake;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /**
   * The next `n` API requests (to `path` only, when given) are carried out (and remembered under
   * their idempotency key) but the connection is dropped before the answer: the caller cannot know
   * whether it worked.
   */
  dropNextResponses(n: number, path?: string): void {
    this.dropsLeft = n;
    this.dropPath = path ?? null;
  }

  /**
   * Stripe forgets an idempotency key 24 hours after its first use; a request with it afterwards
   * runs as new.
   */
  forgetIdempotencyKeys(): void {
    this.idempotent.clear();
  }

  /** Session-creating requests the fake answered with a new session (not replays). */
  get createdSessions(): FakeCheckoutSession[] {
    return [...this.sessions.values()];
  }

  /** The customer paid: what Stripe does when its hosted page completes. */
  completeSession(id: string, paymentStatus: 'paid' | 'unpaid' = 'paid'): FakeCheckoutSession {
    const s = this.mustGet(id);
    s.status = 'complete';
    s.payment_status = paymentStatus;
    s.payment_intent = `pi_test_${randomBytes(12).toString('hex')}`;
    s.url = null;
    return { ...s };
  }

  /** The session timed out unpaid. */
  expireSession(id: string): FakeCheckoutSession {
    const s = this.mustGet(id);
    s.status = 'expired';
    s.url = null;
    return { ...s };
  }

  /** A webhook event payload as Stripe serialises it. */
  eventPayload(type: string, object: unknown, opts: { id?: string; created?: number } = {}): string {
    return JSON.stringify(
      {
        id: opts.id ?? `evt_test_${randomBytes(12).toString('hex')}`,
        object: 'event',
        api_version: '2025-01-01',
        created: opts.created ?? Math.floor(Date.now() / 1000),
        data: { object },
        livemode: false,
        pending_webhooks: 1,
        request: { id: null, idempotency_key: null },
        type,
      },
      null,
      2,
    );
  }

  private mustGet(id: string): FakeCheckoutSession {
    const s = this.sessions.get(id);
    if (!s) throw new Error(`fake Stripe has no session ${id}`);
    return s;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await readBody(req);
    const path = (req.url ?? '/').split('?')[0];
    const method = req.method ?? 'GET';
    const params = method === 'GET' ? parseForm((req.url ?? '').split('?')[1] ?? '') : parseForm(raw);
    const idempotencyKey = header(req, 'idempotency-key');
    const record: RecordedRequest = {
      method,
      path,
      params,
      idempotencyKey,
      authorization: header(req, 'authorization'),
      stripeVersion: header(req, 'stripe-version'),
      status: 0,
    };
    this.requests.push(record);

    const answer = (reply: Reply, extra: Record<string, string> = {}) => {
      record.status = reply.status;
      res.writeHead(reply.status, {
        'Content-Type': 'application/json',
        'Request-Id': `req_${randomBytes(7).toString('hex')}`,
        ...extra,
      });
      res.end(JSON.stringify(reply.body, null, 2));
    };

    if (record.authorization !== `Bearer ${this.options.secretKey}`) {
      return answer(
        stripeError(401, {
          type: 'invalid_request_error',
          message: `Invalid API Key provided: ${redact(record.authorization)}`,
        }),
      );
    }

    // Stripe's idempotency: only POSTs, keyed per API key; the first result of a key is replayed.
    const slot = idempotencyKey && method === 'POST' ? `${this.options.secretKey}:${idempotencyKey}` : null;
    if (slot) {
      const prior = this.idempotent.get(slot);
      const paramsHash = hashParams(params);
      if (prior) {
        if (prior.path !== path || prior.method !== method || prior.paramsHash !== paramsHash) {
          return answer(
            stripeError(400, {
              type: 'idempotency_error',
              message: `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${idempotencyKey}' if you meant to execute a different request.`,
            }),
          );
        }
        if (!this.dropped(res, record))
          answer({ status: prior.status, body: prior.body }, { 'Idempotent-Replayed': 'true' });
        return;
      }
      if (this.inFlight.has(slot)) {
        return answer(
          stripeError(409, {
            type: 'idempotency_error',
            code: 'idempotency_key_in_use',
            message:
              'There is currently another in-progress request using this Stripe-Idempotency-Key. Please try again later.',
          }),
        );
      }
      this.inFlight.add(slot);
      try {
        if (this.simulatedLatencyMs) await simulatedLatency(this.simulatedLatencyMs);
        const reply = this.route(method, path, params);
        // Like Stripe, requests rejected before executing (validation) leave the key unused.
        if (reply.status < 400 || reply.status >= 500)
          this.idempotent.set(slot, { method, path, paramsHash, status: reply.status, body: reply.body });
        if (!this.dropped(res, record)) answer(reply);
        return;
      } finally {
        this.inFlight.delete(slot);
      }
    }
    if (this.simulatedLatencyMs) await simulatedLatency(this.simulatedLatencyMs);
    const reply = this.route(method, path, params);
    if (!this.dropped(res, record)) answer(reply);
  }

  /** Drops the connection instead of answering while drops are pending. */
  private dropped(res: ServerResponse, record: RecordedRequest): boolean {
    if (this.dropsLeft <= 0 || (this.dropPath !== null && record.path !== this.dropPath)) return false;
    this.dropsLeft--;
    record.status = 0;
    res.socket?.destroy();
    return true;
  }

  private route(method: string, path: string, params: Record<string, unknown>): Reply {
    if (method === 'POST' && path === '/v1/checkout/sessions') return this.createSession(params);
    const one = /^\/v1\/checkout\/sessions\/([^/]+)$/.exec(path);
    if (method === 'GET' && one) {
      const s = this.sessions.get(decodeURIComponent(one[1]));
      return s ? { status: 200, body: s } : missing(decodeURIComponent(one[1]));
    }
    const expire = /^\/v1\/checkout\/sessions\/([^/]+)\/expire$/.exec(path);
    if (method === 'POST' && expire) {
      const s = this.sessions.get(decodeURIComponent(expire[1]));
      if (!s) return missing(decodeURIComponent(expire[1]));
      if (s.status !== 'open') {
        return stripeError(400, {
          type: 'invalid_request_error',
          message: `Only Checkout Sessions with a status in ["open"] can be expired. This Checkout Session has a status of "${s.status}".`,
        });
      }
      s.status = 'expired';
      s.url = null;
      return { status: 200, body: s };
    }
    if (method === 'POST' && path === '/v1/refunds') return this.createRefund(params);
    if (method === 'GET' && path === '/v1/refunds') return this.listRefunds(params);
    return stripeError(404, {
      type: 'invalid_request_error',
      message: `Unrecognized request URL (${method}: ${path}). Please see https://stripe.com/docs or we can help at https://support.stripe.com/.`,
    });
  }

  private createRefund(p: Record<string, unknown>): Reply {
    if (this.rateLimitedRefunds > 0) {
      this.rateLimitedRefunds--;
      return stripeError(429, {
        type: 'invalid_request_error',
        code: 'rate_limit',
        message: 'Request rate limit exceeded. Learn more about rate limits here https://stripe.com/docs/rate-limits.',
      });
    }
    const intent = p.payment_intent;
    if (intent === undefined && p.charge === undefined) {
      return stripeError(400, {
        type: 'invalid_request_error',
        message: 'One of the following params should be provided for this request: payment_intent or charge.',
      });
    }
    const session = [...this.sessions.values()].find((s) => s.payment_intent === intent);
    if (!session) return noSuchIntent(intent);
    if (this.refuseRefunds)
      return stripeError(402, {
        type: 'card_error',
        code: 'expired_or_canceled_card',
        message: 'The card this payment was made with can no longer take refunds.',
      });
    const refunded = this.refunds
      .filter((r) => r.payment_intent === intent && r.status !== 'failed' && r.status !== 'canceled')
      .reduce((n, r) => n + r.amount, 0);
    const amount = p.amount === undefined ? session.amount_total - refunded : Number(p.amount);
    if (!Number.isInteger(amount) || amount < 1) return paramInvalid('amount', 'Invalid positive integer');
    if (refunded >= session.amount_total) {
      return stripeError(400, {
        type: 'invalid_request_error',
        code: 'charge_already_refunded',
        message: `Charge for ${String(intent)} has already been refunded.`,
      });
    }
    if (amount > session.amount_total - refunded) {
      return stripeError(400, {
        type: 'invalid_request_error',
        code: 'amount_too_large',
        param: 'amount',
        message: `Refund amount ($${(amount / 100).toFixed(2)}) is greater than unrefunded amount on charge ($${((session.amount_total - refunded) / 100).toFixed(2)})`,
      });
    }
    const refund: FakeRefund = {
      id: `re_test_${randomBytes(12).toString('hex')}`,
      object: 'refund',
      amount,
      charge: `ch_test_${String(intent).slice(8)}`,
      created: Math.floor(Date.now() / 1000),
      currency: session.currency,
      metadata: { ...((p.metadata ?? {}) as Record<string, string>) },
      payment_intent: String(intent),
      reason: typeof p.reason === 'string' ? p.reason : null,
      status: 'succeeded',
    };
    this.refunds.push(refund);
    return { status: 200, body: refund };
  }

  /** The refunds of one payment intent, newest first, as one page of Stripe's list object. */
  private listRefunds(p: Record<string, unknown>): Reply {
    const intent = p.payment_intent;
    if (intent !== undefined && ![...this.sessions.values()].some((s) => s.payment_intent === intent))
      return noSuchIntent(intent);
    const limit = p.limit === undefined ? 10 : Number(p.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 100)
      return paramInvalid('limit', 'This value must be greater than or equal to 1 and less than or equal to 100.');
    const all = this.refunds.filter((r) => intent === undefined || r.payment_intent === intent).reverse();
    return {
      status: 200,
      body: { object: 'list', data: all.slice(0, limit), has_more: all.length > limit, url: '/v1/refunds' },
    };
  }

  private createSession(p: Record<string, unknown>): Reply {
    const mode = p.mode;
    if (mode === undefined) return paramMissing('mode');
    if (mode !== 'payment' && mode !== 'setup' && mode !== 'subscription')
      return paramInvalid('mode', `Invalid mode: must be one of payment, setup, or subscription`);
    if (p.success_url === undefined) return paramMissing('success_url');
    const items = p.line_items;
    if (!Array.isArray(items) || items.length === 0) return paramMissing('line_items');
    let total = 0;
    let currency: string | undefined;
    for (const [i, raw] of items.entries()) {
      const item = raw as Record<string, unknown>;
      const pd = item.price_data as Record<string, unknown> | undefined;
      if (!pd) return paramMissing(`line_items[${i}][price_data]`);
      if (typeof pd.currency !== 'string') return paramMissing(`line_items[${i}][price_data][currency]`);
      const unit = Number(pd.unit_amount);
      if (!Number.isInteger(unit) || unit < 0)
        return paramInvalid(`line_items[${i}][price_data][unit_amount]`, 'Invalid integer');
      const name = (pd.product_data as Record<string, unknown> | undefined)?.name;
      if (typeof name !== 'string' || name === '')
        return paramMissing(`line_items[${i}][price_data][product_data][name]`);
      const qty = Number(item.quantity);
      if (!Number.isInteger(qty) || qty < 1) return paramMissing(`line_items[${i}][quantity]`);
      if (currency && currency !== pd.currency)
        return paramInvalid('line_items', 'All line items must use the same currency.');
      currency = pd.currency;
      total += unit * qty;
    }
    if (mode === 'payment' && total < 50)
      return paramInvalid('line_items', "The Checkout Session's total amount due must add up to at least $0.50 usd");
    const metadata = (p.metadata ?? {}) as Record<string, string>;
    for (const [k, v] of Object.entries(metadata)) {
      if (k.length > 40 || String(v).length > 500)
        return paramInvalid(`metadata[${k}]`, 'Metadata keys are limited to 40 characters and values to 500.');
    }
    const now = Math.floor(Date.now() / 1000);
    const expiresAt = p.expires_at !== undefined ? Number(p.expires_at) : now + 24 * 3600;
    if (!Number.isInteger(expiresAt) || expiresAt < now + 30 * 60 || expiresAt > now + 24 * 3600) {
      return paramInvalid(
        'expires_at',
        'The `expires_at` timestamp must be between 30 minutes and 24 hours from Checkout Session creation.',
      );
    }
    const id = `cs_test_${randomBytes(29).toString('base64url').replace(/[-_]/g, 'a')}`;
    const session: FakeCheckoutSession = {
      id,
      object: 'checkout.session',
      amount_subtotal: total,
      amount_total: total,
      cancel_url: typeof p.cancel_url === 'string' ? p.cancel_url : null,
      client_reference_id: typeof p.client_reference_id === 'string' ? p.client_reference_id : null,
      created: now,
      currency: currency!,
      customer: null,
      customer_email: typeof p.customer_email === 'string' ? p.customer_email : null,
      expires_at: expiresAt,
      livemode: false,
      metadata: { ...metadata },
      mode,
      payment_intent: null,
      payment_status: 'unpaid',
      status: 'open',
      success_url: p.success_url as string,
      url: `https://checkout.stripe.com/c/pay/${id}#fidkdWxOYHwnPyd1blpxYHZxWjA0`,
    };
    this.sessions.set(id, session);
    return { status: 200, body: session };
  }
}

function stripeError(status: number, error: Record<string, unknown>): Reply {
  return { status, body: { error: { ...error, request_log_url: 'https://dashboard.stripe.com/test/logs/req_fake' } } };
}

function paramMissing(param: string): Reply {
  return stripeError(400, {
    type: 'invalid_request_error',
    code: 'parameter_missing',
    param,
    message: `Missing required param: ${param}.`,
  });
}

function paramInvalid(param: string, message: string): Reply {
  return stripeError(400, { type: 'invalid_request_error', code: 'parameter_invalid', param, message });
}

function noSuchIntent(intent: unknown): Reply {
  return stripeError(404, {
    type: 'invalid_request_error',
    code: 'resource_missing',
    param: 'payment_intent',
    message: `No such payment_intent: '${String(intent)}'`,
  });
}

function missing(id: string): Reply {
  return stripeError(404, {
    type: 'invalid_request_error',
    code: 'resource_missing',
    param: 'session',
    message: `No such checkout.session: '${id}'`,
  });
}

function header(req: IncomingMessage, name: string): string | null {
  const v = req.headers[name];
  return typeof v === 'string' ? v : null;
}

function redact(auth: string | null): string {
  const key = auth?.replace(/^Bearer /, '') ?? '';
  return key.length > 8 ? `${key.slice(0, 8)}${'*'.repeat(8)}${key.slice(-4)}` : '********';
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function hashParams(params: Record<string, unknown>): string {
  return createHash('sha256').update(JSON.stringify(params)).digest('hex');
}

/** Decodes `a[b][0][c]=v` pairs, as the SDK encodes them, back into nested objects and arrays. */
export function parseForm(body: string): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  for (const pair of body.split('&')) {
    if (!pair) continue;
    const eq = pair.indexOf('=');
    const key = decodeURIComponent((eq < 0 ? pair : pair.slice(0, eq)).replace(/\+/g, ' '));
    const value = eq < 0 ? '' : decodeURIComponent(pair.slice(eq + 1).replace(/\+/g, ' '));
    const path = key.split(/[[\]]+/).filter((s, i) => s !== '' || i === 0);
    let node: Record<string, unknown> | unknown[] = root;
    for (let i = 0; i < path.length; i++) {
      const seg = path[i];
      const last = i === path.length - 1;
      const nextIsIndex = !last && /^\d+$/.test(path[i + 1]);
      const container = node as Record<string, unknown>;
      if (last) {
        container[seg] = value;
      } else {
        container[seg] ??= nextIsIndex ? [] : {};
        node = container[seg] as Record<string, unknown> | unknown[];
      }
    }
  }
  return root;
}
