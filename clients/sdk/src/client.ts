import createClient, { type Client } from 'openapi-fetch';
import type { components, paths } from './generated/openapi.js';
import { GprApiError, GprRentalStateError, GprTimeoutError } from './errors.js';
import { type EventPage, eventStream, type GprEvent, type StreamOptions } from './events.js';
import { retryingFetch, type RetryPolicy } from './transport.js';
import type { SignedReceipt } from './receipts.js';
import { RECEIPT_KEYS_PATH, type ReceiptKeySet } from '../../../src/vocabulary/receipts.js';
import {
  ENDING_STATUSES,
  isOneOf,
  RENTAL_STATUSES,
  type RentalStatus,
  TERMINAL_STATUSES,
} from '../../../src/vocabulary/statuses.js';

type JsonData<P extends keyof paths, M extends 'get' | 'post', C extends number> = paths[P][M] extends {
  responses: infer R;
}
  ? R extends Record<C, { content: { 'application/json': { data: infer D } } }>
    ? D
    : never
  : never;
type JsonBody<P extends keyof paths> = paths[P]['post'] extends {
  requestBody?: { content: { 'application/json': infer B } };
}
  ? B
  : never;

export type Offer = JsonData<'/api/v1/offers', 'get', 200>[number];
export type GpuSummary = JsonData<'/api/v1/gpus', 'get', 200>;
export type Account = JsonData<'/api/v1/me', 'get', 200>;
export type Balance = JsonData<'/api/v1/billing/balance', 'get', 200>;
export type Signup = JsonData<'/api/v1/signup', 'post', 201>;
/** Key limits for the new account's key; omitted ones take the server's defaults. */
export type SignupOptions = Partial<JsonBody<'/api/v1/signup'>>;
export type AgentKeyIssued = JsonData<'/api/v1/agent-setups/exchange', 'post', 200>;
export type Topup = JsonData<'/api/v1/billing/topups/{topupId}', 'get', 200>;
export type Rental = JsonData<'/api/v1/rentals/{id}', 'get', 200>;
export type RentalRequest = JsonBody<'/api/v1/rentals'>;
export type Deployment = JsonData<'/api/v1/deployments/{id}', 'get', 200>;
export type Credentials = JsonData<'/api/v1/deployments/{id}/credentials/reveal', 'post', 200>;
/** A terminate request's answer: the status after it, when termination was asked for, and what it means. */
export type TerminateAccepted = JsonData<'/api/v1/deployments/{id}/terminate', 'post', 202>;
// The API's statuses as OpenAPI writes them must be the vocabulary's: one added on one side only fails here.
true satisfies [Rental['status']] extends [RentalStatus]
  ? [RentalStatus] extends [Rental['status']]
    ? true
    : false
  : false;
/** What runs on the machine: `image`, `env`, `startupScript`, `ports`, `diskGb` (each optional). */
export type MachineSettings = components['schemas']['MachineSettingsRequest'];
/** Where a starting rental stands (`phase`), e.g. `waiting_for_capacity`, `booting`, `checking_gpus`. */
export type MachinePhase = components['schemas']['MachinePhase'];
/** An exposed port of an ACTIVE rental and the URL it answers at. */
export type Endpoint = components['schemas']['EndpointDto'];
/** What an offer's machine can be given: `customImage`, `startupScript`, `ports`, `maxDiskGb`. */
export type OfferCapabilities = components['schemas']['OfferCapabilitiesDto'];

/** One page of the caller's rentals, newest first. */
export interface RentalPage {
  data: Rental[];
  nextCursor: string | null;
}

export interface GprClientOptions extends RetryPolicy {
  /** Service origin, e.g. https://gpu.example.com (no /api/v1). */
  baseUrl: string;
  /** Agent key `gpr_<prefix>.<secret>`; public calls work without one. */
  token?: string;
  /** Sent as User-Agent, e.g. `gpr/0.1.0`. */
  userAgent?: string;
}

export interface WaitForOptions {
  /**
   * Give up after this long. Default: 15 minutes, counted from the end of the rental's wait for
   * capacity (`waitForCapacityUntil`) when it has one that ends later than now.
   */
  timeoutMs?: number;
  /**
   * The least time between two reads when one comes back without news (only a server that does
   * not hold waiting reads does that; default 1 s). Reads are otherwise held by the server.
   */
  intervalMs?: number;
  /** Called after every read with the rental as it is now. */
  onProgress?: (rental: Rental) => void;
  /** Called with the rental when its status or `phase` differs from the last read's (and after the first read). */
  onPhase?: (rental: Rental) => void;
}

export interface WaitOptions extends WaitForOptions {
  until: 'ACTIVE' | 'TERMINATED';
}

/** The longest a waiting read is held (the server allows 30 s; this leaves room under a 30 s request timeout). */
const WAIT_SECONDS = 25;

/** Default wait for a state: what provisioning may take once there is capacity. */
const DEFAULT_WAIT_MS = 15 * 60_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The GPU rental API with the behaviour every client needs: an `Idempotency-Key` on each create,
 * sent again on retries; 429s waited out per `Retry-After`; errors thrown as {@link GprApiError}.
 */
export class GprClient {
  readonly baseUrl: string;
  private readonly api: Client<paths>;
  private readonly fetch: ReturnType<typeof retryingFetch>;
  private readonly headers: Record<string, string>;
  private readonly plainFetch: typeof fetch;
  /** The longest a waiting read may be held and still be answered within one attempt's timeout. */
  private readonly waitSeconds: number;

  constructor(options: GprClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.fetch = retryingFetch(options);
    this.plainFetch = options.fetch ?? globalThis.fetch;
    this.waitSeconds = Math.max(1, Math.min(WAIT_SECONDS, Math.floor((options.timeoutMs ?? 30_000) / 1000) - 5));
    this.headers = { Accept: 'application/json' };
    if (options.userAgent) this.headers['User-Agent'] = options.userAgent;
    if (options.token) this.headers.Authorization = `Bearer ${options.token}`;
    this.api = createClient<paths>({ baseUrl: this.baseUrl, fetch: this.fetch, headers: this.headers });
  }

  // --- public inventory -------------------------------------------------------------------------

  async offers(): Promise<Offer[]> {
    return unwrap(await this.api.GET('/api/v1/offers'));
  }

  async gpus(): Promise<GpuSummary> {
    return unwrap(await this.api.GET('/api/v1/gpus'));
  }

  // --- account ------------------------------------------------------------------------------------

  /** Headless signup: a new zero-balance account and its key (the token is returned only here). */
  async signup(body: SignupOptions = {}, idempotencyKey: string = crypto.randomUUID()): Promise<Signup> {
    return unwrap(
      await this.api.POST('/api/v1/signup', {
        params: { header: { 'Idempotency-Key': idempotencyKey } },
        body: body as JsonBody<'/api/v1/signup'>,
      }),
    );
  }

  /** Exchanges a one-time setup code from the owner for an agent key. */
  async exchangeSetupCode(setupCode: string): Promise<AgentKeyIssued> {
    return unwrap(await this.api.POST('/api/v1/agent-setups/exchange', { body: { setupCode } }));
  }

  async me(): Promise<Account> {
    return unwrap(await this.api.GET('/api/v1/me'));
  }

  async balance(): Promise<Balance> {
    return unwrap(await this.api.GET('/api/v1/billing/balance'));
  }

  /** A hosted payment link for a human; only their payment credits the balance. */
  async createTopup(amountMinor: number, idempotencyKey: string = crypto.randomUUID()): Promise<Topup> {
    return unwrap(
      await this.api.POST('/api/v1/billing/topups', {
        params: { header: { 'Idempotency-Key': idempotencyKey } },
        body: { amountMinor },
      }),
    ) as Topup;
  }

  async getTopup(topupId: string): Promise<Topup> {
    return unwrap(await this.api.GET('/api/v1/billing/topups/{topupId}', { params: { path: { topupId } } }));
  }

  /** Polls a top-up until it is PAID (resolves) or EXPIRED/FAILED (throws). */
  async waitForTopup(
    topupId: string,
    opts: { timeoutMs?: number; intervalMs?: number; onProgress?: (t: Topup) => void } = {},
  ): Promise<Topup> {
    const deadline = Date.now() + (opts.timeoutMs ?? 30 * 60_000);
    for (;;) {
      const t = await this.getTopup(topupId);
      opts.onProgress?.(t);
      if (t.status === 'PAID') return t;
      if (t.status === 'EXPIRED' || t.status === 'FAILED') {
        throw new GprApiError(410, 'TOPUP_EXPIRED', `Top-up ${topupId} is ${t.status}; create a new one.`, null);
      }
      if (Date.now() >= deadline)
        throw new GprTimeoutError(`Top-up ${topupId} was not paid in time (still ${t.status}).`);
      await sleep(opts.intervalMs ?? 2000);
    }
  }

  // --- rentals ------------------------------------------------------------------------------------

  /**
   * Starts a rental: `offerId`, or `gpuModel` + `gpuCount` + `maxHourlyPriceMinor`; optionally
   * `machine` (image, env, startupScript, ports, diskGb), `terminateAfterSeconds` (a lease) and,
   * by GPU model, `waitForCapacitySeconds`. The key identifies this intent: pass the same one to
   * retry safely (the same rental comes back); by default a fresh UUID is used and resent on the
   * client's own retries. The SDK neither logs nor keeps `env` values or the script.
   */
  async createRental(body: RentalRequest, idempotencyKey: string = crypto.randomUUID()): Promise<Rental> {
    return unwrap(
      await this.api.POST('/api/v1/rentals', { params: { header: { 'Idempotency-Key': idempotencyKey } }, body }),
    ) as Rental;
  }

  async getRental(id: string): Promise<Rental> {
    return unwrap(await this.api.GET('/api/v1/rentals/{id}', { params: { path: { id } } }));
  }

  /** The caller's rentals, newest first (`GET /api/v1/rentals`). */
  async listRentals(opts: { limit?: number; cursor?: string } = {}): Promise<RentalPage> {
    const q = new URLSearchParams();
    if (opts.limit !== undefined) q.set('limit', String(opts.limit));
    if (opts.cursor) q.set('cursor', opts.cursor);
    const res = await this.fetch(`${this.baseUrl}/api/v1/rentals${q.size ? `?${q}` : ''}`, { headers: this.headers });
    if (!res.ok) throw await GprApiError.fromResponse(res);
    const body = (await res.json()) as { data: Rental[]; meta?: { nextCursor?: string | null } };
    return { data: body.data, nextCursor: body.meta?.nextCursor ?? null };
  }

  /**
   * A waiting read: the rental once its status is one of `statuses`, or as it is after
   * `waitSeconds` (1 to 30), whichever comes first; at once when it already is.
   */
  async readRentalWhen(id: string, statuses: RentalStatus[], waitSeconds: number): Promise<Rental> {
    return unwrap(
      await this.api.GET('/api/v1/rentals/{id}', {
        params: { path: { id }, query: { waitFor: statuses.join(','), waitSeconds } },
      }),
    );
  }

  /**
   * Waits until the rental's status is one of `statuses` and returns it. Built on waiting reads: each
   * read is held by the server until the status changes (or up to 25 s), so every change is seen
   * within about a second without polling. Throws {@link GprRentalStateError} when the rental ends
   * (TERMINATED, FAILED) outside `statuses`, and {@link GprTimeoutError} when time runs out.
   */
  async waitFor(id: string, statuses: RentalStatus[], opts: WaitForOptions = {}): Promise<Rental> {
    let deadline = Date.now() + (opts.timeoutMs ?? DEFAULT_WAIT_MS);
    let r = await this.getRental(id);
    const capacityUntil =
      opts.timeoutMs === undefined && r.waitForCapacityUntil ? Date.parse(r.waitForCapacityUntil) : NaN;
    // A rental waiting for capacity may rightly stay PENDING until its own deadline.
    if (Number.isFinite(capacityUntil)) deadline = Math.max(deadline, capacityUntil + DEFAULT_WAIT_MS);
    let last: string | undefined;
    for (;;) {
      opts.onProgress?.(r);
      const now = `${r.status}/${r.phase ?? ''}`;
      if (now !== last) opts.onPhase?.(r);
      last = now;
      if (statuses.includes(r.status)) return r;
      if (isOneOf(TERMINAL_STATUSES, r.status)) {
        const why =
          r.status === 'FAILED'
            ? `${r.failureCode ?? 'FAILED'}: ${r.failureReason ?? 'provisioning failed'}`
            : r.status;
        throw new GprRentalStateError(
          r.status === 'FAILED' ? (r.failureCode ?? 'RENTAL_FAILED') : 'RENTAL_ENDED',
          `Rental ${id} will not become ${statuses.join(' or ')} (${why}).`,
          r,
        );
      }
      const left = deadline - Date.now();
      if (left <= 0)
        throw new GprTimeoutError(`Rental ${id} is still ${r.status}, not ${statuses.join(' or ')}, after the wait.`);
      // Held until the status is any other than now's: each change is reported as it happens.
      const started = Date.now();
      const status = r.status;
      r = await this.readRentalWhen(
        id,
        RENTAL_STATUSES.filter((x) => x !== status),
        Math.max(1, Math.min(this.waitSeconds, Math.ceil(left / 1000))),
      );
      const early = (opts.intervalMs ?? 1000) - (Date.now() - started);
      if (r.status === status && early > 0) await sleep(Math.min(early, Math.max(0, deadline - Date.now())));
    }
  }

  /**
   * Waits until the rental reaches `until` (with {@link waitFor}); throws when it ends elsewhere
   * (FAILED, or TERMINATING/TERMINATED while waiting for ACTIVE) or time runs out.
   */
  async waitForRental(id: string, opts: WaitOptions): Promise<Rental> {
    const stops: RentalStatus[] = opts.until === 'ACTIVE' ? ['ACTIVE', ...ENDING_STATUSES] : [...TERMINAL_STATUSES];
    const r = await this.waitFor(id, stops, opts);
    if (r.status === opts.until) return r;
    const why =
      r.status === 'FAILED' ? `${r.failureCode ?? 'FAILED'}: ${r.failureReason ?? 'provisioning failed'}` : r.status;
    throw new GprRentalStateError(
      r.status === 'FAILED' ? (r.failureCode ?? 'RENTAL_FAILED') : 'RENTAL_ENDED',
      `Rental ${id} will not become ${opts.until} (${why}).`,
      r,
    );
  }

  // --- events -------------------------------------------------------------------------------------

  /**
   * One page of the caller's events after `after`, oldest first (`limit` 1 to 100, default 50).
   * Without `after` the page is the caller's newest `limit` events: keep `nextAfter` for the next call.
   */
  async events(opts: { after?: string; limit?: number } = {}): Promise<EventPage> {
    const q = new URLSearchParams();
    if (opts.after) q.set('after', opts.after);
    if (opts.limit !== undefined) q.set('limit', String(opts.limit));
    const res = await this.fetch(`${this.baseUrl}/api/v1/events${q.size ? `?${q}` : ''}`, { headers: this.headers });
    if (!res.ok) throw await GprApiError.fromResponse(res);
    const body = (await res.json()) as { data: GprEvent[]; meta: { nextAfter: string } };
    return { data: body.data, nextAfter: body.meta.nextAfter };
  }

  /**
   * The caller's events as they happen (Server-Sent Events): those after `after` first, then live.
   * Reconnects with the last id when the server ends the stream; stop with `signal` or by leaving the loop.
   */
  streamEvents(opts: StreamOptions = {}): AsyncGenerator<GprEvent> {
    return eventStream({ url: `${this.baseUrl}/api/v1/events`, headers: this.headers, fetch: this.plainFetch }, opts);
  }

  // --- deployments --------------------------------------------------------------------------------

  async listDeployments(): Promise<Deployment[]> {
    return unwrap(await this.api.GET('/api/v1/deployments'));
  }

  async getDeployment(id: string): Promise<Deployment> {
    return unwrap(await this.api.GET('/api/v1/deployments/{id}', { params: { path: { id } } }));
  }

  /** SSH access including the private key; every call is audited by the service. */
  async revealCredentials(deploymentId: string): Promise<Credentials> {
    return unwrap(
      await this.api.POST('/api/v1/deployments/{id}/credentials/reveal', { params: { path: { id: deploymentId } } }),
    );
  }

  /** Irreversible: destroys the machine. Completes asynchronously; wait with {@link waitForRental}. */
  async terminate(deploymentId: string): Promise<TerminateAccepted> {
    return unwrap(
      await this.api.POST('/api/v1/deployments/{id}/terminate', { params: { path: { id: deploymentId } } }),
    );
  }

  /**
   * The rental's teardown receipt (a rental or deployment id): issued once it is TERMINATED after a
   * verified destruction; a 404 before that says when. Check it with {@link verifyReceipt}.
   */
  async getReceipt(id: string): Promise<SignedReceipt> {
    return unwrap(await this.api.GET('/api/v1/rentals/{id}/receipt', { params: { path: { id } } }));
  }

  /** The keys this service signs receipts with, active and retired (public, no token needed). */
  async receiptKeys(): Promise<ReceiptKeySet> {
    const res = await this.fetch(`${this.baseUrl}${RECEIPT_KEYS_PATH}`, { headers: this.headers });
    if (!res.ok) throw await GprApiError.fromResponse(res);
    return (await res.json()) as ReceiptKeySet;
  }

  /** The rental of a rental id or a deployment id, whether or not it has a deployment yet. */
  async findRental(id: string): Promise<Rental> {
    try {
      return await this.getRental(id);
    } catch (err) {
      if (!(err instanceof GprApiError) || err.status !== 404) throw err;
      return this.getRental((await this.getDeployment(id)).rentalId);
    }
  }

  /**
   * Accepts a rental id or a deployment id and returns both: agents hold either.
   * A rental id is tried first; a 404 there means the id is a deployment's.
   */
  async resolve(id: string): Promise<{ rentalId: string; deploymentId: string; rental: Rental }> {
    try {
      const rental = await this.getRental(id);
      if (!rental.deploymentId)
        throw new GprApiError(409, 'NO_DEPLOYMENT', `Rental ${id} has no deployment yet.`, null);
      return { rentalId: rental.rentalId, deploymentId: rental.deploymentId, rental };
    } catch (err) {
      if (!(err instanceof GprApiError) || err.status !== 404) throw err;
      const deployment = await this.getDeployment(id);
      const rental = await this.getRental(deployment.rentalId);
      return { rentalId: rental.rentalId, deploymentId: deployment.id, rental };
    }
  }
}

function unwrap<D>(result: { data?: { data: D }; error?: unknown; response: Response }): D {
  const { response } = result;
  if (response.ok && result.data) return result.data.data;
  const e =
    (result.error as { error?: { code?: string; message?: string; requestId?: string } } | undefined)?.error ?? {};
  throw new GprApiError(
    response.status,
    e.code ?? `HTTP_${response.status}`,
    e.message ?? (response.statusText || `HTTP ${response.status}`),
    e.requestId ?? response.headers.get('x-request-id'),
    retryAfterHeader(response),
  );
}

function retryAfterHeader(res: Response): number | undefined {
  const v = res.headers.get('retry-after');
  return v && /^\d+$/.test(v) ? Number(v) : undefined;
}
