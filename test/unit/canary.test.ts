import assert from 'node:assert/strict';
import { canaryExitStatus, CANARY_TIMEOUT_MINUTES, parseCanaryArgs } from '../../src/cli/owner-canary.js';
import {
  CANARY_EXPECTED_MINUTES,
  canaryLeaseSeconds,
  chooseCanaryOffer,
  expectedCostMinor,
} from '../../src/modules/canary/canary-offer.js';
import { formatCanaryReport, phaseLine, type CanaryReport } from '../../src/modules/canary/canary-report.js';
import { canaryStop, phaseDetail, phaseOf, stopOf } from '../../src/modules/canary/canary-watch.js';
import type { OfferDto } from '../../src/modules/inventory/inventory.dto.js';
import type { RentalDto } from '../../src/modules/rentals/wire/rentals.dto.js';

const offer = (id: string, provider: string, pricePerHourMinor: number, extra: Partial<OfferDto> = {}): OfferDto => ({
  id,
  category: 'datacenter',
  name: 'H100 SXM',
  vramGb: 80,
  gpuCount: 1,
  pricePerHourMinor,
  currency: 'USD',
  maximumDurationSeconds: 86400,
  provider,
  capabilities: { customImage: false, startupScript: false, ports: 0, maxDiskGb: null },
  ...extra,
});

const report = (over: Partial<CanaryReport> = {}): CanaryReport => ({
  ok: true,
  outcome: 'completed',
  provider: 'vast',
  maxSpendMinor: 500,
  offer: { id: 'o-1', name: 'H100 SXM', gpuCount: 1, pricePerHourMinor: 231 },
  rentalId: 'r-1',
  deploymentId: 'd-1',
  phases: [
    { phase: 'offer_chosen', at: '2026-01-01T00:00:00.000Z', sinceStartMs: 0, detail: 'offer chosen: 1x H100 SXM' },
    { phase: 'ACTIVE', at: '2026-01-01T00:01:05.000Z', sinceStartMs: 65_432, detail: 'ACTIVE: checked' },
  ],
  gpus: ['GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)'],
  costMinor: 3,
  charges: [{ kind: 'USAGE', amountMinor: -3, description: 'Usage of rental r-1' }],
  status: 'TERMINATED',
  terminationReason: 'USER',
  endedAt: '2026-01-01T00:02:00.000Z',
  destructionVerified: true,
  receipt: null,
  problem: null,
  ...over,
});

describe('owner providers canary (arguments, offer choice, report)', () => {
  describe(parseCanaryArgs.name, () => {
    it('refuses to start without --max-spend, saying it is the cap on real money', () => {
      const parsed = parseCanaryArgs(['--provider', 'vast']);
      assert.ok('usage' in parsed);
      assert.match(parsed.usage, /--max-spend is required: it is the cap on real money/);
    });

    it('reads --max-spend as dollars people type, by the one rule (parseUsd)', () => {
      for (const [typed, cents] of [
        ['5', 500],
        ['7.50', 750],
        ['$12', 1200],
        ['12,5', 1250],
        ['20 USD', 2000],
      ] as const) {
        const parsed = parseCanaryArgs(['--provider', 'vast', '--max-spend', typed]);
        assert.ok(!('usage' in parsed), `${typed}: ${JSON.stringify(parsed)}`);
        assert.equal(parsed.maxSpendMinor, cents, typed);
      }
      const bad = parseCanaryArgs(['--provider', 'vast', '--max-spend', '5.001']);
      assert.ok('usage' in bad);
      assert.match(bad.usage, /"5\.001" is not an amount in US dollars: write dollars like 12\.50/);
    });

    it('refuses a cap under the smallest budget of any rental, and one past the largest', () => {
      const low = parseCanaryArgs(['--provider', 'vast', '--max-spend', '4.99']);
      assert.ok('usage' in low);
      assert.match(low.usage, /at least \$5\.00, the smallest budget of any rental; got \$4\.99/);
      const high = parseCanaryArgs(['--provider', 'vast', '--max-spend', '1000001']);
      assert.ok('usage' in high);
      assert.match(high.usage, /at most \$1,000,000\.00/);
    });

    it('takes --gpu, --timeout-minutes (default 30) and --json; refuses unknown flags and bad minutes', () => {
      assert.deepEqual(parseCanaryArgs(['--provider', ' runpod ', '--max-spend', '5']), {
        provider: 'runpod',
        maxSpendMinor: 500,
        gpu: null,
        timeoutMinutes: CANARY_TIMEOUT_MINUTES.default,
        json: false,
      });
      assert.deepEqual(
        parseCanaryArgs([
          '--provider',
          'lambda',
          '--max-spend',
          '9',
          '--gpu',
          'H100',
          '--timeout-minutes',
          '45',
          '--json',
        ]),
        { provider: 'lambda', maxSpendMinor: 900, gpu: 'H100', timeoutMinutes: 45, json: true },
      );
      for (const minutes of ['0', '1441', '2.5', 'soon']) {
        const parsed = parseCanaryArgs(['--provider', 'vast', '--max-spend', '5', '--timeout-minutes', minutes]);
        assert.ok('usage' in parsed, minutes);
        assert.match(parsed.usage, /--timeout-minutes must be a whole number from 1 to 1440/);
      }
      assert.ok('usage' in parseCanaryArgs(['--provider', 'vast', '--max-spend', '5', '--yes']));
      assert.ok('usage' in parseCanaryArgs(['--max-spend', '5']));
    });
  });

  describe(chooseCanaryOffer.name, () => {
    const offers = [
      offer('a', 'runpod', 100),
      offer('b', 'vast', 900),
      offer('c', 'vast', 231),
      offer('d', 'vast', 4000),
    ];

    it("rents the provider's cheapest offer whose expected ten minutes keep within the cap", () => {
      assert.equal(CANARY_EXPECTED_MINUTES, 10);
      const choice = chooseCanaryOffer(offers, 'vast', 500, null);
      assert.ok('offer' in choice);
      assert.equal(choice.offer.id, 'c', "another provider's cheaper offer is not this provider's");
      assert.equal(expectedCostMinor(4000), 667, 'rounded up, as a cap must be');
    });

    it('says what cap would do when the cheapest offer costs more than the cap over ten minutes', () => {
      const choice = chooseCanaryOffer([offer('d', 'vast', 4000)], 'vast', 500, 'H100');
      assert.ok('problem' in choice);
      assert.match(
        choice.problem,
        /--max-spend \$5\.00 does not cover 10 minutes of vast's cheapest "H100" offer \(1x H100 SXM at \$40\.00\/h\); pass --max-spend of at least \$6\.67\./,
      );
    });

    it('says when the provider has nothing on sale (of that GPU)', () => {
      const none = chooseCanaryOffer(offers, 'lambda', 500, 'A100');
      assert.ok('problem' in none);
      assert.match(none.problem, /lambda has no offer of "A100" on sale now/);
    });

    it('gives the rental a lease of its time bound, within what the offer allows', () => {
      assert.equal(canaryLeaseSeconds(30 * 60_000, offer('x', 'vast', 1)), 1800);
      assert.equal(canaryLeaseSeconds(30 * 60_000, offer('x', 'vast', 1, { maximumDurationSeconds: 600 })), 600);
      assert.equal(canaryLeaseSeconds(1000, offer('x', 'vast', 1)), 60);
      assert.equal(canaryLeaseSeconds(30 * 60_000, offer('x', 'vast', 1, { maximumDurationSeconds: 30 })), undefined);
    });
  });

  describe('phases and the report', () => {
    it('names a rental phase by its machine phase while it starts, else its status', () => {
      const r = (over: Partial<RentalDto>) => ({ status: 'PROVISIONING', phase: null, ...over }) as RentalDto;
      assert.equal(phaseOf(r({ phase: 'waiting_for_ssh' })), 'waiting_for_ssh');
      assert.equal(phaseOf(r({ status: 'ACTIVE' })), 'ACTIVE');
      assert.equal(phaseDetail(r({ phase: 'pulling_image' })), 'pulling the image');
      assert.equal(
        phaseDetail(r({ status: 'FAILED', failureCode: 'NO_CAPACITY', failureReason: 'none left' })),
        'FAILED: NO_CAPACITY: none left',
      );
      assert.match(
        phaseDetail(r({ status: 'TERMINATING', terminationReason: 'SPEND_CAP' })),
        /^TERMINATING \(SPEND_CAP\)/,
      );
    });

    it('prints one stderr line per phase with its time since the start', () => {
      assert.equal(phaseLine(report().phases[1]), 'canary   +65.4s  ACTIVE: checked');
    });

    it('reports a full cycle in words: offer, phases, GPUs, cost from the ledger, how it ended', () => {
      const text = formatCanaryReport(report());
      assert.match(text, /^Canary on vast: completed: a full rent, SSH, GPU and destroy cycle\.$/m);
      assert.match(text, /^Offer: 1x H100 SXM at \$2\.31\/h \(offer o-1\), within --max-spend \$5\.00\.$/m);
      assert.match(text, /^ {4}\+65\.4s {2}ACTIVE: checked$/m);
      assert.match(text, /^ {2}GPU 0: NVIDIA H100 80GB HBM3/m);
      assert.match(text, /^Cost: \$0\.03 from the ledger \(1 entry of the rental\):$/m);
      assert.match(text, /^Ended: TERMINATED at 2026-01-01T00:02:00\.000Z \(USER\), destruction verified\.$/m);
    });

    it('says so when the destruction is not verified, and what went wrong', () => {
      const text = formatCanaryReport(
        report({ ok: false, outcome: 'left', status: 'TERMINATING', destructionVerified: false, problem: 'left' }),
      );
      assert.match(text, /^Canary on vast: left ending in the service\.$/m);
      assert.match(text, /^Problem: left$/m);
      assert.match(text, /^Ended: NOT verified; the rental is TERMINATING\.$/m);
    });

    it('exits 0 only for a full cycle; 130 when interrupted or left; 1 otherwise', () => {
      assert.equal(canaryExitStatus(report()), 0);
      assert.equal(canaryExitStatus(report({ ok: false, outcome: 'interrupted' })), 130);
      assert.equal(canaryExitStatus(report({ ok: false, outcome: 'left' })), 130);
      assert.equal(canaryExitStatus(report({ ok: false, outcome: 'failed' })), 1);
    });

    it('tells a stop of a wait from any other error', () => {
      assert.equal(stopOf(canaryStop('leave', 'x')), 'leave');
      assert.equal(stopOf(new Error('x')), null);
      assert.equal(stopOf(null), null);
    });
  });
});
