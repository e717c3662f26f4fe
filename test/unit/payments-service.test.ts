import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Config } from '../../src/config.js';
import { createLogger, type Logger } from '../../src/logger.js';
import { createPayments, reconcilePayments, type Payments } from '../../src/modules/billing/payments.js';
import {
  billingWorld,
  checkoutRow,
  FakePaymentProvider,
  principal,
  refusal,
  SESSION_MS,
  signedEvent,
  WEBHOOK_SECRET,
  type BillingWorld,
} from '../fakes/billing-services.js';
import { assertMemoryLedgerConsistent } from '../helpers/memory-ledger.js';

/** The parts of the configuration card payments read. */
function config(nodeEnv: string, webhookSecretGenerated: boolean): Config {
  return {
    nodeEnv,
    http: { publicBaseUrl: 'https://rent.example' },
    stripe: { webhookSecret: WEBHOOK_SECRET, webhookSecretGenerated },
  } as unknown as Config;
}

/** A logger that keeps what it is asked to log at info, by message. */
function recordingLogger(): { logger: Logger; infos: { msg: string; settled?: number }[] } {
  const infos: { msg: string; settled?: number }[] = [];
  const logger = { info: (obj: { settled?: number }, msg: string) => void infos.push({ ...obj, msg }) };
  return { logger: logger as unknown as Logger, infos };
}

describe('createPayments and the payments job (memory store)', () => {
  let w: BillingWorld;
  beforeEach(() => (w = billingWorld()));
  afterEach(() => assertMemoryLedgerConsistent(w.store.tables));

  const payments = (cfg: Config, provider: FakePaymentProvider | null = new FakePaymentProvider(w.clock)): Payments =>
    createPayments({
      config: cfg,
      store: w.store,
      clock: w.clock,
      logger: createLogger('silent'),
      ledger: w.ledger,
      cardOrders: w.cardOrders,
      provider,
    });
  /** A paid top-up's event, delivered to `p`. */
  async function payTopup(p: Payments) {
    const who = await principal(w);
    const { topup } = await p.topups.create(who, randomUUID(), { amountMinor: 1000 });
    const provider = p.provider as FakePaymentProvider;
    const e = signedEvent(w, 'checkout.session.completed', provider.pay(checkoutRow(w, topup.topupId).sessionId!));
    return { topupId: topup.topupId, receive: () => p.events.receiveStripe(e.body, e.signature) };
  }

  it('refuses every webhook in production while the secret is the public development one', async () => {
    const p = payments(config('production', true));
    const { topupId, receive } = await payTopup(p);
    const err = await refusal(receive());
    assert.equal(err.code, 'UNAVAILABLE');
    assert.equal(checkoutRow(w, topupId).status, 'OPEN');
  });

  it('verifies webhooks with the configured secret in production, and with the development one elsewhere', async () => {
    for (const p of [payments(config('production', false)), payments(config('development', true))]) {
      const { topupId, receive } = await payTopup(p);
      assert.deepEqual(await receive(), { received: true });
      assert.equal(checkoutRow(w, topupId).status, 'PAID');
    }
  });

  it('sends payers back to the public base URL', async () => {
    const p = payments(config('development', true));
    const who = await principal(w);
    const { topup } = await p.topups.create(who, randomUUID(), { amountMinor: 1000 });
    const [request] = (p.provider as FakePaymentProvider).created;
    assert.equal(request.successUrl, `https://rent.example/checkout/${topup.topupId}/success`);
    assert.equal(request.cancelUrl, `https://rent.example/checkout/${topup.topupId}/cancel`);
  });

  it('runs without a provider: top-ups are refused with 503 and the job settles nothing', async () => {
    const p = payments(config('production', false), null);
    assert.equal(p.provider, null);
    assert.equal(p.cardOrders, w.cardOrders);
    const who = await principal(w);
    assert.equal((await refusal(p.topups.create(who, randomUUID(), { amountMinor: 1000 }))).code, 'UNAVAILABLE');
    assert.equal(await p.events.reconcile(), 0);
  });

  it('logs what the job settled, and says nothing when it settled nothing', async () => {
    const who = await principal(w);
    const { topup } = await w.topups.create(who, randomUUID(), { amountMinor: 1000 });
    w.provider.pay(checkoutRow(w, topup.topupId).sessionId!);
    const { logger, infos } = recordingLogger();
    assert.equal(await reconcilePayments({ payments: w, logger }), 0, 'inside the grace after expiry');
    w.clock.advance(SESSION_MS + 11 * 60 * 1000);
    assert.equal(await reconcilePayments({ payments: w, logger }), 1);
    assert.equal(await reconcilePayments({ payments: w, logger }), 0);
    assert.deepEqual(infos, [{ settled: 1, msg: 'payments reconciled' }]);
    assert.equal(checkoutRow(w, topup.topupId).status, 'PAID');
  });
});
