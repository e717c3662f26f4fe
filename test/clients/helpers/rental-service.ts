import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';

export const RENTAL_ID = '7d3c1f0e-2b4a-4c5d-8e6f-0a1b2c3d4e5f';
export const DEPLOYMENT_ID = '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d';

/** One request as the service received it. */
export interface Received {
  method: string;
  path: string;
  idempotencyKey?: string;
  body?: unknown;
}

/** A refusal the service gives the next rental request, as the real one words it. */
export interface Refusal {
  status: number;
  code: string;
  message: string;
}

type RentalFields = Record<string, unknown>;

/**
 * The rentals API in miniature, for what the clients send and how they show what comes back: it
 * records every request with its body, answers a create with a rental built from the body the way
 * the service reads one (variable names and the script's hash, never their values), and answers
 * each later read with the next of `states` (the last one sticks).
 */
export class RentalService {
  readonly received: Received[] = [];
  /** Applied in turn to the created rental by each GET of it. */
  states: RentalFields[] = [];
  /** The answer to the next create, instead of a rental. */
  refuse?: Refusal;
  private created?: RentalFields;
  private reads = 0;
  private server?: Server;
  baseUrl = '';

  get creates(): Received[] {
    return this.received.filter((r) => r.method === 'POST' && r.path === '/api/v1/rentals');
  }

  reset(): void {
    this.received.length = 0;
    this.states = [];
    this.refuse = undefined;
    this.created = undefined;
    this.reads = 0;
  }

  async start(): Promise<void> {
    this.server = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const text = Buffer.concat(chunks).toString('utf8');
      const path = req.url ?? '';
      this.received.push({
        method: req.method ?? '',
        path,
        idempotencyKey: req.headers['idempotency-key'] as string | undefined,
        body: text ? JSON.parse(text) : undefined,
      });
      const send = (status: number, body: unknown) => {
        res.writeHead(status, { 'Content-Type': 'application/json', 'X-Request-Id': 'req_fake' });
        res.end(JSON.stringify(body));
      };
      const fail = (r: Refusal) =>
        send(r.status, { error: { code: r.code, message: r.message, requestId: 'req_fake' } });
      if (req.method === 'POST' && path === '/api/v1/rentals') {
        if (this.refuse) return fail(this.refuse);
        this.created = rentalOf(JSON.parse(text));
        this.reads = 0;
        return send(201, { data: this.created });
      }
      // A waiting read is answered at once, like a server that does not hold reads.
      const read = /^\/api\/v1\/rentals\/([^/?]+)(\?.*)?$/.exec(path);
      if (req.method === 'GET' && read && this.created && read[1] === RENTAL_ID) {
        const state = this.states[Math.min(this.reads++, this.states.length - 1)] ?? {};
        return send(200, { data: { ...this.created, ...state } });
      }
      fail({ status: 404, code: 'NOT_FOUND', message: 'Nothing with this id is visible to this key.' });
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    this.baseUrl = `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
  }

  async stop(): Promise<void> {
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}

/** A new rental as the service answers a create: PENDING, the machine as asked without its secrets. */
function rentalOf(body: RentalFields): RentalFields {
  const machine = (body.machine ?? {}) as {
    image?: string;
    env?: Record<string, string>;
    startupScript?: string;
    ports?: number[];
    diskGb?: number;
  };
  const waits = typeof body.waitForCapacitySeconds === 'number';
  return {
    rentalId: RENTAL_ID,
    orderId: RENTAL_ID,
    deploymentId: DEPLOYMENT_ID,
    status: 'PENDING',
    gpuName: 'NVIDIA H100 SXM',
    matchedBy: 'model',
    matchNote: 'The model named by gpuModel.',
    gpuCount: 1,
    provider: 'local',
    terminationReason: null,
    endedAt: null,
    deployment: null,
    machine: {
      image: machine.image ?? null,
      envNames: Object.keys(machine.env ?? {}).sort(),
      startupScriptSha256: machine.startupScript
        ? createHash('sha256').update(machine.startupScript).digest('hex')
        : null,
      ports: machine.ports ?? [],
      diskGb: machine.diskGb ?? null,
    },
    phase: waits ? 'waiting_for_capacity' : 'creating',
    phaseSince: '2026-01-15T12:00:00.000Z',
    endpoints: [],
    endsAt: null,
    leaseSeconds: typeof body.terminateAfterSeconds === 'number' ? body.terminateAfterSeconds : null,
    waitForCapacityUntil: waits ? '2026-01-15T12:30:00.000Z' : null,
    quote: { hourlyPriceMinor: 299, durationSeconds: null, totalMinor: 0, currency: 'USD' },
    billingModel: 'ACCOUNT_BALANCE',
    funding: 'CREDITS',
    candidateOfferIds: ['offer-1'],
    failureCode: null,
    failureReason: null,
    reversalStatus: null,
    createdAt: '2026-01-15T12:00:00.000Z',
  };
}
