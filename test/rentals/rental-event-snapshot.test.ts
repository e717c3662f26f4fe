import assert from 'node:assert/strict';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import type { RentalStatus } from '../../src/modules/rentals/state/rental-status.js';
import { transition, type TransitionExtra } from '../../src/modules/rentals/state/rental-state.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { account, offerIds, rentOk } from '../helpers/rentals.js';
import { sentRequests } from '../helpers/sql-requests.js';

const OFFERS: LocalInventoryOffer[] = [
  {
    key: 'snap-l4',
    name: 'NVIDIA L4',
    category: 'datacenter',
    vramGb: 24,
    gpuCount: 1,
    pricePerHourMinor: 50,
    maximumDurationSeconds: 86400,
  },
];

/**
 * A status change's event carries the rental as a read returns it, built from the rows the
 * transition read (with what it wrote to them), not read again while its updates hold the rows.
 */
describe('rental events: the snapshot of a status change', function () {
  this.timeout(60_000);
  let ctx: TestContext;
  let offer: string;
  before(async () => {
    // No worker: the test moves the rental itself.
    ctx = await createTestContext({ offers: OFFERS });
    offer = (await offerIds(ctx))['snap-l4'];
  });
  after(() => ctx.close());

  it('equals a read of the rental after each move, and is written with no read after the first update', async () => {
    const who = await account(ctx, { creditsMinor: 10_000 });
    const { rentalId, deploymentId } = await rentOk(ctx, who, { offerId: offer });
    const move = async (from: RentalStatus, to: RentalStatus, extra: Omit<TransitionExtra, 'at'> = {}) => {
      ctx.clock.advance(1000);
      const { result: moved, sent } = await sentRequests(() =>
        ctx.services.store.transaction((r) =>
          transition(r, deploymentId, [from], to, { at: ctx.clock.now(), ...extra }),
        ),
      );
      assert.ok(moved, `${from} -> ${to}`);
      const statements = sent.flatMap((s) => s.split(';\n')).map((s) => s.trim());
      const firstUpdate = statements.findIndex((s) => /^UPDATE\b/i.test(s));
      assert.ok(firstUpdate > 0, JSON.stringify(statements));
      const reads = statements.slice(0, firstUpdate).filter((s) => /^SELECT\b/i.test(s));
      assert.equal(reads.length, 1, `${to}: the rental is read in one statement: ${JSON.stringify(reads)}`);
      assert.deepEqual(
        statements.slice(firstUpdate).filter((s) => /^SELECT\b/i.test(s)),
        [],
        `${to}: nothing is read under the rental's locks`,
      );
      const [row] = (await ctx.services.ds.query(
        'SELECT type, data FROM events WHERE rental_id = ? ORDER BY id DESC LIMIT 1',
        [rentalId],
      )) as { type: string; data: string | object }[];
      const data = typeof row.data === 'string' ? JSON.parse(row.data) : row.data;
      const read = (await ctx.api.get(`/api/v1/rentals/${rentalId}`).set(who.auth)).body.data;
      assert.equal(row.type, `rental.${to.toLowerCase()}`);
      assert.deepEqual(data, read, `${to}: the event shows what a read shows`);
    };
    await move('PENDING', 'PROVISIONING', { deployment: { phase: 'CREATING', phaseSince: ctx.clock.now() } });
    const started = new Date(ctx.clock.now().getTime() + 1000);
    await move('PROVISIONING', 'ACTIVE', {
      deployment: {
        startedAt: started,
        endsAt: new Date(started.getTime() + 3600_000),
        meteredUntil: started,
        sshHost: '127.0.0.1',
        sshPort: 2222,
        sshUser: 'gpu',
        endpoints: [{ port: 8080, url: 'http://127.0.0.1:8080' }],
        phase: null,
        phaseSince: null,
      },
    });
    await move('ACTIVE', 'TERMINATING');
    await move('TERMINATING', 'TERMINATED', { deployment: { endedAt: new Date(ctx.clock.now().getTime() + 1000) } });
  });
});
