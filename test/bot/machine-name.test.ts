import assert from 'node:assert/strict';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { Account } from '../../src/modules/accounts/account.entity.js';
import { Offer } from '../../src/modules/inventory/offer.entity.js';
import { Deployment } from '../../src/modules/rentals/store/deployment.entity.js';
import { transition } from '../../src/modules/rentals/state/rental-state.js';
import { addKey, credit, rentOk } from '../helpers/rentals.js';
import { createBotHarness, telegramId, type BotHarness } from './harness.js';

// Two models of one GPU family: a family intent ("H100") gets both as candidates, so the name
// shown says which one the rental's machine comes from.
const base = { category: 'datacenter', gpuCount: 1, maximumDurationSeconds: 86400 };
const OFFERS: LocalInventoryOffer[] = [
  { ...base, key: 'pcie', name: 'NVIDIA H100 PCIe', vramGb: 80, pricePerHourMinor: 249 },
  { ...base, key: 'nvl', name: 'NVIDIA H100 NVL', vramGb: 94, pricePerHourMinor: 279 },
];

describe('the machine a rental runs on is named alike by the API, the bot and its notifications', () => {
  let h: BotHarness;
  before(async () => {
    h = await createBotHarness({ offers: OFFERS });
  });
  after(() => h.close());

  it('names the same GPU everywhere, for a rental moved to its second candidate and one whose deployment has no offer yet', async () => {
    const owner = h.owner(telegramId(), 'Grace');
    await owner.send('/start');
    const account = await h.ctx.services.ds.getRepository(Account).findOneByOrFail({ telegramUserId: owner.id });
    await credit(h.ctx, account.id, 5000);
    const agent = await addKey(h.ctx, account.id);
    const intent = { gpuModel: 'H100', gpuCount: 1, maxHourlyPriceMinor: 1000, budgetMinor: 500 };

    const moved = await rentOk(h.ctx, agent, intent);
    const unplaced = await rentOk(h.ctx, agent, intent);
    const candidates = moved.candidateOfferIds as string[];
    assert.equal(candidates.length, 2, 'both offers are candidates');
    assert.deepEqual(unplaced.candidateOfferIds, candidates);
    // Provisioning moved this one to its second candidate (it patches the deployment's offer).
    await h.ctx.services.ds.getRepository(Deployment).update({ id: moved.deploymentId }, { offerId: candidates[1] });
    // Moved as the lifecycle moves them, so each move writes the event the owner is told of.
    const at = h.ctx.clock.now();
    await h.ctx.services.store.transaction((r) => transition(r, moved.deploymentId, ['PENDING'], 'ACTIVE', { at }));
    // This one failed before any offer was tried: its machine is the first candidate admission chose.
    await h.ctx.services.ds.getRepository(Deployment).update({ id: unplaced.deploymentId }, { offerId: null });
    await h.ctx.services.store.transaction((r) =>
      transition(r, unplaced.deploymentId, ['PENDING'], 'FAILED', {
        at,
        order: { failureReason: 'no machine', failureCode: 'PROVISIONING_FAILED', reversalStatus: 'SUCCEEDED' },
      }),
    );

    const [list] = await owner.send('/rentals');
    await h.runNotifications();
    const notices = h.fake.calls
      .filter((c) => c.method === 'sendMessage' && Number(c.params.chat_id) === owner.id)
      .map((c) => c.params.text as string);

    const nameOf = async (offerId: string) =>
      (await h.ctx.services.ds.getRepository(Offer).findOneByOrFail({ id: offerId })).name;
    const expected = new Map([
      [moved.rentalId, await nameOf(candidates[1])],
      [unplaced.rentalId, await nameOf(candidates[0])],
    ]);
    assert.notEqual(expected.get(moved.rentalId), expected.get(unplaced.rentalId));
    for (const [rentalId, gpu] of expected) {
      const rental = (await h.ctx.api.get(`/api/v1/rentals/${rentalId}`).set(agent.auth)).body.data;
      const deployment = (await h.ctx.api.get(`/api/v1/deployments/${rental.deploymentId}`).set(agent.auth)).body.data;
      assert.equal(rental.gpuName, gpu, 'API rental');
      assert.equal(deployment.gpuName, gpu, 'API deployment');

      // A /rentals entry: "<n>. <b>STATUS</b> NAME · $x/h ... <code>rentalId</code>".
      const entry = list.text.split('\n\n').find((e) => e.includes(rentalId));
      assert.ok(entry, `${rentalId} is listed in ${JSON.stringify(list.text)}`);
      assert.equal(/^\d+\. [A-Z_]+ (.+) · \$/.exec(entry)?.[1], gpu, `bot /rentals: ${entry}`);

      const notice = notices.find((n) => n.includes(`Rental ${rentalId}.`));
      assert.ok(notice, `a notification about ${rentalId} in ${JSON.stringify(notices)}`);
      assert.equal(
        /^\S+ Rental (?:is ACTIVE|FAILED): (.+?) started by/.exec(notice)?.[1],
        gpu,
        `notification: ${notice}`,
      );
    }
  });
});
