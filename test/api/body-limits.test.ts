import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { rentalRefusalNext } from '../../src/vocabulary/machine-hints.js';
import { MAX_ENV_TOTAL_BYTES, MAX_STARTUP_SCRIPT_BYTES } from '../../src/vocabulary/limits.js';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { bodyLimitOf, JSON_BODY_LIMIT_BYTES } from '../../src/http/body-shape.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { account, offerIds, rent } from '../helpers/rentals.js';

const OFFERS: LocalInventoryOffer[] = [
  {
    key: 'b-full',
    name: 'NVIDIA H100 SXM',
    category: 'datacenter',
    vramGb: 80,
    gpuCount: 1,
    pricePerHourMinor: 300,
    maximumDurationSeconds: 86400,
    provisionSeconds: 0,
  },
];

/** A script of exactly `bytes` UTF-8 bytes that JSON writes at its longest: control characters become six-byte escapes. */
function escapedScript(bytes: number): string {
  return `#!/bin/sh\n${'\u0001'.repeat(bytes - 10)}`;
}

describe('body limits follow the published limits of the fields', () => {
  let ctx: TestContext;
  let ids: Record<string, string>;
  before(async () => {
    ctx = await createTestContext({ offers: OFFERS });
    ids = await offerIds(ctx);
  });
  after(() => ctx.close());

  it('admits a rental whose script and variables are at their published limits, however JSON escapes them', async () => {
    const who = await account(ctx, { creditsMinor: 5000 });
    // 49 variables of names and values adding up to the total limit, every value written as escapes.
    const names = Array.from({ length: 49 }, (_, i) => `VAR_${String(i).padStart(2, '0')}`);
    const valueBytes = Math.floor((MAX_ENV_TOTAL_BYTES - names.join('').length) / names.length);
    const env = Object.fromEntries(names.map((n) => [n, '\u0002'.repeat(Math.min(valueBytes, 4096))]));
    const body = { offerId: ids['b-full'], machine: { startupScript: escapedScript(MAX_STARTUP_SCRIPT_BYTES), env } };
    assert.ok(JSON.stringify(body).length > 250 * 1024, 'the body as sent is far over the standard 8 KiB');
    const res = await rent(ctx, who, body);
    assert.equal(res.status, 201, res.text);
    // The agent's case: a 12,000-byte script and 28,000 bytes of variables.
    const plain = await rent(ctx, who, {
      offerId: ids['b-full'],
      machine: {
        startupScript: `#!/bin/sh\n${'echo "x"\n'.repeat(1199)}`,
        env: {
          A: 'v'.repeat(4000),
          B: 'w'.repeat(4000),
          C: 'x'.repeat(4000),
          D: 'y'.repeat(4000),
          E: 'z'.repeat(4000),
          F: 'u'.repeat(4000),
          G: 't'.repeat(4000),
        },
      },
    });
    assert.notEqual(plain.status, 413, plain.text);
  });

  it('refuses a script over its own limit with 422 naming the field, and a body over the route limit with 413 naming the fields and their limits', async () => {
    const who = await account(ctx, { creditsMinor: 5000 });
    const over = await rent(ctx, who, {
      offerId: ids['b-full'],
      machine: { startupScript: `#!/bin/sh\n${'#'.repeat(MAX_STARTUP_SCRIPT_BYTES)}` },
    });
    assert.equal(over.status, 422, over.text);
    assert.match(over.body.error.message, /machine\.startupScript/);

    const huge = await rent(ctx, who, {
      offerId: ids['b-full'],
      machine: { startupScript: 'x'.repeat(bodyLimitOf('/api/v1/rentals').bytes + 1) },
    });
    assert.equal(huge.status, 413, huge.text);
    assert.equal(huge.body.error.code, 'PAYLOAD_TOO_LARGE');
    assert.match(
      huge.body.error.message,
      /larger than this route's \d+ KiB limit, which fits machine\.startupScript \(at most 16,384 bytes\) and machine\.env \(at most 50 variables of 4,096 bytes, 32,768 bytes in all\)/,
    );
    // What gpr and gpr-mcp then tell the agent to do, in their own flags' names.
    const names = {
      image: '--image',
      env: '--env',
      startupScript: '--script',
      ports: '--port',
      diskGb: '--disk',
      lease: '--ttl',
      waitForCapacity: '--wait-capacity',
      offers: 'see `gpr offers`',
      account: 'see `gpr whoami`',
    };
    assert.match(
      rentalRefusalNext('PAYLOAD_TOO_LARGE', huge.body.error.message, names) ?? '',
      /^The startup script \(--script\) is at most 16,384 bytes and the variables \(--env\) at most 50 of 4,096 bytes/,
    );
  });

  it('keeps the standard limit elsewhere, and says what the route takes', async () => {
    const res = await ctx.api
      .post('/api/v1/signup')
      .set('Idempotency-Key', randomUUID())
      .set('Content-Type', 'application/json')
      .send(JSON.stringify({ name: 'x'.repeat(JSON_BODY_LIMIT_BYTES + 10) }));
    assert.equal(res.status, 413);
    assert.match(
      res.body.error.message,
      /^The request body is larger than this route's 8 KiB limit; its fields are ids, names, numbers and URLs/,
    );
  });
});
