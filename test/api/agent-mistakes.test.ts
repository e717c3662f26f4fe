import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { IDEMPOTENCY_KEY_HINT } from '../../src/vocabulary/access-hints.js';
import { BUDGET_RULE } from '../../src/vocabulary/budget-hints.js';
import { MIN_BUDGET_MINOR } from '../../src/vocabulary/limits.js';
import { GPU_FAMILY_INTENT } from '../../src/vocabulary/machine-hints.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { signup } from '../helpers/factories.js';
import { account, discardQueuedRentalJobs, offerIds, rent } from '../helpers/rentals.js';

const base = { category: 'datacenter', maximumDurationSeconds: 86400 };
const OFFERS: LocalInventoryOffer[] = [
  { ...base, key: 'h100-pcie', name: 'NVIDIA H100 PCIe', vramGb: 80, gpuCount: 1, pricePerHourMinor: 249 },
  { ...base, key: 'h100-sxm', name: 'NVIDIA H100 80GB HBM3', vramGb: 80, gpuCount: 1, pricePerHourMinor: 299 },
  { ...base, key: 'h100-2x', name: 'NVIDIA H100 PCIe', vramGb: 80, gpuCount: 2, pricePerHourMinor: 498 },
  { ...base, key: 'a100-40', name: 'A100 (40 GB SXM4)', vramGb: 40, gpuCount: 1, pricePerHourMinor: 129 },
  { ...base, key: 'a100-80', name: 'NVIDIA A100-SXM4-80GB', vramGb: 80, gpuCount: 1, pricePerHourMinor: 179 },
];

/** The mistakes an agent makes most, replayed through the HTTP API: each is the right rental or a 4xx that says what to do. */
describe('agent mistakes at admission and input', () => {
  let ctx: TestContext;
  let id: Record<string, string>;
  before(async () => {
    ctx = await createTestContext({ offers: OFFERS });
    id = await offerIds(ctx);
  });
  after(async () => {
    await discardQueuedRentalJobs(ctx);
    await ctx.close();
  });

  describe('a GPU count written into gpuModel (row 1)', () => {
    it('takes the count from the name when gpuCount says the same', async () => {
      const who = await account(ctx, { creditsMinor: 10_000 });
      for (const gpuModel of ['2x H100', '2 x H100', '2X h100', '2xH100', 'H100 x2', 'H100 x 2', '2×H100']) {
        const res = await rent(ctx, who, { gpuModel, gpuCount: 2, maxHourlyPriceMinor: 1000 });
        assert.equal(res.status, 201, `${gpuModel}: ${JSON.stringify(res.body)}`);
        assert.deepEqual(res.body.data.candidateOfferIds, [id['h100-2x']], gpuModel);
        assert.equal(res.body.data.gpuCount, 2, gpuModel);
      }
    });

    it('refuses a count in the name that disagrees with gpuCount, naming both fields and the fix', async () => {
      const who = await account(ctx, { creditsMinor: 10_000 });
      for (const gpuModel of ['2x H100', '8xH100', 'H100 x2']) {
        const res = await rent(ctx, who, { gpuModel, gpuCount: 1, maxHourlyPriceMinor: 1000 });
        assert.equal(res.status, 422, `${gpuModel}: ${JSON.stringify(res.body)}`);
        assert.equal(res.body.error.code, 'VALIDATION_FAILED');
        const msg: string = res.body.error.message;
        assert.match(msg, /gpuModel/);
        assert.match(msg, /gpuCount is 1/);
        assert.match(msg, /"gpuModel": "H100"/, msg);
      }
      assert.equal((await ctx.api.get('/api/v1/rentals').set(who.auth)).body.data.length, 0, 'nothing was rented');
    });

    it('never echoes the count twice when nothing matches', async () => {
      const who = await account(ctx, { creditsMinor: 10_000 });
      const res = await rent(ctx, who, { gpuModel: '4x H100', gpuCount: 4, maxHourlyPriceMinor: 5000 });
      assert.equal(res.status, 422);
      assert.equal(res.body.error.code, 'NO_MATCHING_OFFER');
      assert.doesNotMatch(res.body.error.message, /4 x 4x/);
      assert.match(res.body.error.message, /4 x H100/);
    });
  });

  describe('budgets (rows 2 and 3)', () => {
    it('refuses a budget that would stop the machine minutes after it starts, in cents and dollars', async () => {
      const who = await account(ctx, { creditsMinor: 10_000 });
      const res = await rent(ctx, who, { offerId: id['h100-pcie'], budgetMinor: 5 });
      assert.equal(res.status, 422, JSON.stringify(res.body));
      assert.equal(res.body.error.code, 'BUDGET_TOO_SMALL');
      const msg: string = res.body.error.message;
      assert.match(msg, /budgetMinor is in USD cents \(500 = \$5\.00\)/);
      assert.match(msg, /5 is \$0\.05; at 249 cents\/hour it buys 72 s/);
      assert.match(msg, /Next: send budgetMinor of 500 or more \(if you meant \$5, send 500\)/);
    });

    it('holds one minimum for every billing model: 100 is refused on a balance account, 500 is admitted', async () => {
      const balance = await account(ctx, { creditsMinor: 10_000 });
      const legacy = await account(ctx, { creditsMinor: 10_000, billingModel: 'LEGACY_PREPAID' });
      for (const who of [balance, legacy]) {
        const small = await rent(ctx, who, {
          gpuModel: 'H100',
          gpuCount: 1,
          maxHourlyPriceMinor: 1000,
          budgetMinor: 100,
        });
        assert.equal(small.status, 422, JSON.stringify(small.body));
        assert.equal(small.body.error.code, 'BUDGET_TOO_SMALL');
        assert.match(small.body.error.message, /must be at least 500 \(\$5\.00\)/);
        const enough = await rent(ctx, who, {
          gpuModel: 'H100',
          gpuCount: 1,
          maxHourlyPriceMinor: 1000,
          budgetMinor: MIN_BUDGET_MINOR,
        });
        assert.equal(enough.status, 201, JSON.stringify(enough.body));
      }
    });

    it('states the rule the same way in /llms.txt, docs/api.md and the skill', async () => {
      const llms = (await ctx.api.get('/llms.txt')).text;
      assert.ok(llms.includes(BUDGET_RULE), 'llms.txt');
      for (const file of ['docs/api.md', 'clients/skill/gpu-rental/SKILL.md']) {
        const text = readFileSync(file, 'utf8').replace(/\s+/g, ' ');
        assert.ok(text.includes(BUDGET_RULE), file);
      }
    });
  });

  describe('which model a family name chose (row 4)', () => {
    it('says in the 201 and in GET which model it rented and why', async () => {
      const who = await account(ctx, { creditsMinor: 10_000 });
      const res = await rent(ctx, who, { gpuModel: 'A100', gpuCount: 1, maxHourlyPriceMinor: 1000 });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      const r = res.body.data;
      assert.equal(r.gpuName, 'A100 SXM4 40GB');
      assert.equal(r.matchedBy, 'family');
      assert.match(r.matchNote, /"A100" names the family A100/);
      assert.match(r.matchNote, /A100 SXM4 40GB/);
      assert.match(r.matchNote, /"A100 80GB"/);
      const got = await ctx.api.get(`/api/v1/rentals/${r.rentalId}`).set(who.auth);
      assert.equal(got.body.data.matchedBy, 'family');
      assert.equal(got.body.data.matchNote, r.matchNote);

      const model = await rent(ctx, who, { gpuModel: 'A100 80GB', gpuCount: 1, maxHourlyPriceMinor: 1000 });
      assert.equal(model.body.data.gpuName, 'A100 SXM4 80GB');
      assert.equal(model.body.data.matchedBy, 'model');
      const offer = await rent(ctx, who, { offerId: id['h100-sxm'] });
      assert.equal(offer.body.data.matchedBy, 'offer');
    });

    it('suggests only the models of the family on sale for the request, each spelling admitted as sent', async () => {
      // On sale here: the A100 SXM4 parts and the H100 PCIe and SXM; no one offers an A100 PCIe or an H100 NVL.
      const who = await account(ctx, { creditsMinor: 100_000 });
      const res = await rent(ctx, who, { gpuModel: 'A100', gpuCount: 1, maxHourlyPriceMinor: 1000 });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      const note: string = res.body.data.matchNote;
      assert.doesNotMatch(note, /PCIe/, note);
      const advice = note.slice(note.indexOf('To choose'));
      const spellings = [...advice.matchAll(/"([^"]+)"/g)].map((m) => m[1]);
      assert.deepEqual(spellings, ['A100 80GB', 'A100 SXM4 80GB'], note);
      const got = await ctx.api.get(`/api/v1/rentals/${res.body.data.rentalId}`).set(who.auth);
      assert.equal(got.body.data.matchNote, note);
      const listed = (await ctx.api.get('/api/v1/rentals').set(who.auth)).body.data as { matchNote: string }[];
      assert.deepEqual(
        listed.map((r) => r.matchNote),
        [note],
      );
      for (const gpuModel of spellings) {
        const named = await rent(ctx, who, { gpuModel, gpuCount: 1, maxHourlyPriceMinor: 1000 });
        assert.equal(named.status, 201, `${gpuModel}: ${JSON.stringify(named.body)}`);
        assert.equal(named.body.data.gpuName, 'A100 SXM4 80GB', gpuModel);
      }

      const h100 = await rent(ctx, who, { gpuModel: 'H100', gpuCount: 1, maxHourlyPriceMinor: 1000 });
      assert.equal(h100.body.data.gpuName, 'H100 PCIe');
      assert.match(h100.body.data.matchNote, /To choose, name a model on sale at admission .*: "H100 SXM"\.$/);
      assert.doesNotMatch(h100.body.data.matchNote, /NVL/);
      // Under a ceiling only the PCIe part fits, nothing else is suggested, and the note says why.
      const cheap = await rent(ctx, who, { gpuModel: 'H100', gpuCount: 1, maxHourlyPriceMinor: 260 });
      assert.equal(cheap.status, 201, JSON.stringify(cheap.body));
      const cheapNote: string = cheap.body.data.matchNote;
      assert.match(
        cheapNote,
        /No other model of H100 was on sale at admission for this gpuCount, price ceiling and machine settings; naming a model narrows the choice to that model alone\.$/,
      );
      assert.doesNotMatch(cheapNote, /SXM|NVL|To choose/);
      const again = await ctx.api.get(`/api/v1/rentals/${cheap.body.data.rentalId}`).set(who.auth);
      assert.equal(again.body.data.matchNote, cheapNote);
    });

    it('documents family intent in /llms.txt', async () => {
      assert.ok((await ctx.api.get('/llms.txt')).text.includes(GPU_FAMILY_INTENT));
    });
  });

  describe('money fields in dollars (row 8)', () => {
    it('says "USD cents: 350 = $3.50" and the range for 3.5, "3.50" and 20 alike', async () => {
      const who = await account(ctx, { creditsMinor: 10_000, scopes: ['read', 'rent', 'manage', 'billing'] });
      const cases: [string, object, RegExp][] = [
        [
          '/api/v1/billing/topups',
          { amountMinor: 3.5 },
          /amountMinor is in USD cents: 350 = \$3\.50; send a whole number from 500 to 50000 \(\$5\.00 to \$500\.00\)\. If you meant \$3\.50, send 350\./,
        ],
        [
          '/api/v1/billing/topups',
          { amountMinor: '3.50' },
          /amountMinor is in USD cents: 350 = \$3\.50; send a whole number from 500 to 50000/,
        ],
        [
          '/api/v1/billing/topups',
          { amountMinor: 20 },
          /amountMinor is in USD cents: 350 = \$3\.50; send a whole number from 500 to 50000 \(\$5\.00 to \$500\.00\)\. If you meant \$20\.00, send 2000\./,
        ],
        [
          '/api/v1/rentals',
          { gpuModel: 'H100', gpuCount: 1, maxHourlyPriceMinor: 3.5 },
          /maxHourlyPriceMinor is in USD cents: 350 = \$3\.50; send a whole number from 1 to 100000000/,
        ],
        [
          '/api/v1/rentals',
          { offerId: id['h100-pcie'], budgetMinor: 12.5 },
          /budgetMinor is in USD cents: 350 = \$3\.50/,
        ],
      ];
      for (const [path, body, expected] of cases) {
        const res = await ctx.api.post(path).set(who.auth).set('Idempotency-Key', randomUUID()).send(body);
        assert.equal(res.status, 422, `${JSON.stringify(body)}: ${JSON.stringify(res.body)}`);
        assert.equal(res.body.error.code, 'VALIDATION_FAILED');
        assert.match(res.body.error.message, expected, JSON.stringify(body));
      }
    });
  });

  describe('Idempotency-Key (row 9)', () => {
    it('says what the header is, that a retry reuses it, and how to make one, when it is missing, empty or too long', async () => {
      const who = await account(ctx, { creditsMinor: 10_000, scopes: ['read', 'rent', 'manage', 'billing'] });
      const body = { offerId: id['h100-pcie'] };
      const missing = await ctx.api.post('/api/v1/rentals').set(who.auth).send(body);
      const empty = await ctx.api.post('/api/v1/rentals').set(who.auth).set('Idempotency-Key', '').send(body);
      const long = await ctx.api
        .post('/api/v1/rentals')
        .set(who.auth)
        .set('Idempotency-Key', 'k'.repeat(129))
        .send(body);
      const topup = await ctx.api.post('/api/v1/billing/topups').set(who.auth).send({ amountMinor: 500 });
      for (const res of [missing, empty, long, topup]) {
        assert.equal(res.status, 400, JSON.stringify(res.body));
        assert.equal(res.body.error.code, 'INVALID_REQUEST');
        const msg: string = res.body.error.message;
        assert.ok(msg.includes(IDEMPOTENCY_KEY_HINT), msg);
        assert.match(msg, /1 to 128 printable characters/);
        assert.match(msg, /same key/);
        assert.match(msg, /node -e "console\.log\(crypto\.randomUUID\(\)\)"/);
      }
      const signupNoUuid = await ctx.api.post('/api/v1/signup').set('Idempotency-Key', 'not-a-uuid').send({});
      assert.equal(signupNoUuid.status, 400);
      assert.match(signupNoUuid.body.error.message, /must be a UUID/);
      assert.match(signupNoUuid.body.error.message, /crypto\.randomUUID/);
    });

    it('the quickstart no longer depends on uuidgen', async () => {
      const llms = (await ctx.api.get('/llms.txt')).text;
      assert.doesNotMatch(llms, /\$\(uuidgen\)/);
      assert.match(llms, /Idempotency-Key: \$\(node -e "console\.log\(crypto\.randomUUID\(\)\)"\)/);
      assert.doesNotMatch(readFileSync('README.md', 'utf8'), /\$\(uuidgen\)/);
    });
  });

  describe('401 (row 10)', () => {
    it('keeps one body for every cause, and it says how to send a key and how to get one', async () => {
      const a = await signup(ctx);
      const bodies = new Set<string>();
      for (const header of [
        undefined,
        'Bearer',
        `Bearer ${a.token.slice(4)}`,
        `${a.token}`,
        `Bearer gpr_ZZZZZZZZ.${'A'.repeat(43)}`,
      ]) {
        const req = ctx.api.get('/api/v1/me');
        if (header) req.set('Authorization', header);
        const res = await req;
        assert.equal(res.status, 401);
        bodies.add(JSON.stringify({ ...res.body.error, requestId: '' }));
        assert.match(res.body.error.message, /Authorization: Bearer gpr_<prefix>\.<secret>/);
        assert.match(res.body.error.message, /POST \/api\/v1\/signup/);
        assert.match(res.body.error.message, /setup code/);
      }
      assert.equal(bodies.size, 1);
    });
  });

  describe('shapes, units and content types (round two)', () => {
    it('reads a body sent without Content-Type, or labelled as `curl -d` labels it, as the JSON it is; anything else is a 415 that says what to send', async () => {
      const who = await account(ctx, { creditsMinor: 10_000 });
      const body = JSON.stringify({ offerId: id['a100-40'] });
      const form = await ctx.api
        .post('/api/v1/rentals')
        .set(who.auth)
        .set('Idempotency-Key', randomUUID())
        .set('Content-Type', 'application/x-www-form-urlencoded')
        .send(body);
      assert.equal(form.status, 201, form.text);
      const text = await ctx.api
        .post('/api/v1/rentals')
        .set(who.auth)
        .set('Idempotency-Key', randomUUID())
        .set('Content-Type', 'text/plain')
        .send(body);
      assert.equal(text.status, 201, text.text);
      const notJson = await ctx.api
        .post('/api/v1/rentals')
        .set(who.auth)
        .set('Idempotency-Key', randomUUID())
        .set('Content-Type', 'application/x-www-form-urlencoded')
        .send('offerId=x');
      assert.equal(notJson.status, 415, notJson.text);
      assert.match(
        notJson.body.error.message,
        /^The request body is not JSON: .*send JSON with Content-Type: application\/json\.$/,
      );
      const multipart = await ctx.api
        .post('/api/v1/rentals')
        .set(who.auth)
        .set('Idempotency-Key', randomUUID())
        .set('Content-Type', 'multipart/form-data; boundary=x')
        .send('--x--');
      assert.equal(multipart.status, 415);
      assert.match(
        multipart.body.error.message,
        /send the body as JSON with Content-Type: application\/json \(got multipart\/form-data\)/,
      );
      const broken = await ctx.api
        .post('/api/v1/rentals')
        .set(who.auth)
        .set('Idempotency-Key', randomUUID())
        .set('Content-Type', 'application/json')
        .send('{"offerId":');
      assert.equal(broken.status, 400, 'labelled JSON that does not parse stays malformed JSON');
    });

    it('a known model no one offers now says how to wait for it, and the request it names is admitted to wait', async () => {
      const who = await account(ctx, { creditsMinor: 10_000 });
      const body = { gpuModel: 'B200', gpuCount: 1, maxHourlyPriceMinor: 2000 };
      const none = await rent(ctx, who, body);
      assert.equal(none.status, 422);
      assert.equal(none.body.error.code, 'NO_MATCHING_OFFER');
      assert.match(
        none.body.error.message,
        /To wait for one instead, send the same request with waitForCapacitySeconds \(60 to 86,400, on a balance account\)/,
      );
      const waiting = await rent(ctx, who, { ...body, waitForCapacitySeconds: 600 });
      assert.equal(waiting.status, 201, waiting.text);
      assert.equal(waiting.body.data.phase, 'waiting_for_capacity');
      const pricey = await rent(ctx, who, { gpuModel: 'H100', gpuCount: 1, maxHourlyPriceMinor: 100 });
      assert.match(pricey.body.error.message, /Raise maxHourlyPriceMinor to at least 249\. To wait for one instead/);
    });

    it('names the cents field for a dollar name, and the event types a webhook may take', async () => {
      const who = await account(ctx, { creditsMinor: 10_000 });
      const topup = await ctx.api
        .post('/api/v1/billing/topups')
        .set(who.auth)
        .set('Idempotency-Key', randomUUID())
        .send({ amount: 20 });
      assert.equal(topup.status, 422);
      assert.match(
        topup.body.error.message,
        /unknown property "amount"; this route accepts amountMinor\. amount is amountMinor here: amountMinor is in USD cents: 350 = \$3\.50; .*If you meant \$20\.00, send 2000\./,
      );
      const hook = await ctx.api
        .post('/api/v1/webhook-endpoints')
        .set(who.auth)
        .set('Idempotency-Key', randomUUID())
        .send({ url: 'https://example.com/hook' });
      assert.equal(hook.status, 422);
      assert.match(
        hook.body.error.message,
        /eventTypes: is required: one or more of rental\.provisioning, rental\.active, .*credits\.low/,
      );
    });
  });
});
