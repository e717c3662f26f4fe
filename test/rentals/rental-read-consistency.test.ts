import assert from 'node:assert/strict';
import type { DataSource, EntityTarget, ObjectLiteral, Repository } from 'typeorm';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import { Order } from '../../src/modules/rentals/store/order.entity.js';
import { RentalReads } from '../../src/modules/rentals/store/rental-reads.repository.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { recountKeySlots } from '../helpers/ledger.js';
import { account, offerIds, rentOk } from '../helpers/rentals.js';

const OFFERS: LocalInventoryOffer[] = [
  {
    key: 'rc-a',
    name: 'NVIDIA L4',
    category: 'datacenter',
    vramGb: 24,
    gpuCount: 1,
    pricePerHourMinor: 100,
    maximumDurationSeconds: 86400,
  },
];

/**
 * A DataSource whose next read of a deployment first runs `between`: a status change committing
 * after the order was read and before its deployment is, deterministically.
 */
function commitBetweenReads(ds: DataSource, between: { run: (() => Promise<void>) | null }): DataSource {
  return new Proxy(ds, {
    get(target, prop, receiver) {
      if (prop !== 'getRepository') return Reflect.get(target, prop, receiver);
      return <T extends ObjectLiteral>(entity: EntityTarget<T>): Repository<T> => {
        const repo = target.getRepository(entity);
        if (entity !== Deployment) return repo;
        return new Proxy(repo, {
          get(r, p, rr) {
            if (p !== 'findOneBy') return Reflect.get(r, p, rr);
            return async (...args: Parameters<Repository<T>['findOneBy']>) => {
              const run = between.run;
              between.run = null;
              if (run) await run();
              return r.findOneBy(...args);
            };
          },
        });
      };
    },
  });
}

describe('a rental read on one side of a status change', function () {
  this.timeout(60_000);
  let ctx: TestContext;

  before(async () => {
    ctx = await createTestContext({ offers: OFFERS });
  });
  after(() => ctx.close());

  it('never shows a deployment FAILED beside an order that has not failed yet (no failure code)', async () => {
    const who = await account(ctx, { creditsMinor: 5000 });
    const { rentalId, deploymentId } = await rentOk(ctx, who, { offerId: (await offerIds(ctx))['rc-a'] });
    const ds = ctx.services.ds;
    const between = {
      run: async () => {
        // What the lifecycle's transition commits: the deployment and its order together.
        await ds.transaction(async (m) => {
          await m.getRepository(Deployment).update({ id: deploymentId }, { status: 'FAILED' });
          await m
            .getRepository(Order)
            .update({ id: rentalId }, { status: 'FAILED', failureCode: 'NO_CAPACITY', failureReason: 'none left' });
        });
      },
    };
    const reads = new RentalReads(commitBetweenReads(ds, between));
    const rows = await reads.visibleRental({ kind: 'OWNER', accountId: who.accountId }, rentalId);
    assert.equal(between.run, null, 'the change committed between the two reads');
    assert.equal(rows!.deployment!.status, 'FAILED');
    assert.equal(rows!.order.status, 'FAILED', 'the order is read again');
    assert.equal(rows!.order.failureCode, 'NO_CAPACITY');
    // And when nothing moves, one read of each.
    const again = await new RentalReads(ds).rental(rentalId);
    assert.equal(again.order.status, again.deployment!.status);
    // The rental was moved by hand, outside the state machine: its key's slots are counted again.
    await recountKeySlots(ds, who.keyId);
  });
});
