import assert from 'node:assert/strict';
import type { DataSource } from 'typeorm';
import { ManualClock } from '../../src/clock.js';
import { AppError } from '../../src/errors/app-error.js';
import { createLogger } from '../../src/logger.js';
import { InventoryRefresher } from '../../src/modules/inventory/inventory-refresh.js';
import { InventoryService } from '../../src/modules/inventory/inventory.service.js';
import type { MachineNeeds } from '../../src/modules/inventory/offer-candidates.js';
import { Offer, offerCapabilities } from '../../src/modules/inventory/offer.entity.js';
import { cheapestOffersOfShape, inventoryVersion } from '../../src/modules/inventory/offers.repository.js';
import type { MachineCapabilities } from '../../src/providers/provider.js';
import { ProviderRegistry } from '../../src/providers/provider-registry.js';
import { createStore } from '../../src/repositories.js';
import { testDataSource } from '../helpers/db.js';
import { addScriptedCloud, cloudOffer } from './scripted-provider.js';

const NOTHING: MachineNeeds = { customImage: false, startupScript: false, ports: 0, diskGb: null };
const caps = (c: Partial<MachineCapabilities>): MachineCapabilities => ({
  customImage: false,
  startupScript: false,
  ports: 0,
  maxDiskGb: null,
  ...c,
});

describe('offer capabilities in the cache and among candidates', () => {
  const registry = new ProviderRegistry();
  const cloud = addScriptedCloud(registry, 'caps-cloud');
  const clock = new ManualClock();
  let ds: DataSource;
  const refresh = async () =>
    (await new InventoryRefresher(createStore(ds), registry, clock, createLogger('silent'), 600).refreshAll())[0];
  const row = (key: string) =>
    ds.getRepository(Offer).findOneByOrFail({ provider: 'caps-cloud', providerOfferKey: key, available: true });

  before(async () => {
    ds = await testDataSource();
  });
  after(async () => {
    // Take this suite's offers off the shared cache.
    cloud.offers = [];
    await refresh();
  });

  it('stores what each listed offer declares, and nothing for an offer that declares nothing or what cannot be', async () => {
    cloud.offers = [
      cloudOffer({
        key: 'full',
        capabilities: caps({ customImage: true, startupScript: true, ports: 3, maxDiskGb: 200 }),
      }),
      cloudOffer({ key: 'bare' }),
      cloudOffer({
        key: 'odd',
        capabilities: {
          customImage: true,
          startupScript: 'yes',
          ports: -1,
          maxDiskGb: 0.5,
        } as unknown as MachineCapabilities,
      }),
    ];
    await refresh();
    assert.deepEqual(offerCapabilities(await row('full')), {
      customImage: true,
      startupScript: true,
      ports: 3,
      maxDiskGb: 200,
    });
    assert.deepEqual(offerCapabilities(await row('bare')), {
      customImage: false,
      startupScript: false,
      ports: 0,
      maxDiskGb: null,
    });
    assert.deepEqual(offerCapabilities(await row('odd')), {
      customImage: true,
      startupScript: false,
      ports: 0,
      maxDiskGb: null,
    });
  });

  it('counts a change of capabilities as a change of the offer: same id, new values, the version moves', async () => {
    const first = caps({ customImage: true, ports: 3 });
    cloud.offers = [cloudOffer({ key: 'moving', capabilities: first })];
    await refresh();
    const before = await row('moving');
    const version = await inventoryVersion(ds);
    const unchanged = await refresh();
    assert.equal(unchanged.added, 0);
    assert.equal(await inventoryVersion(ds), version, 'an unchanged listing leaves the version');
    const changes: MachineCapabilities[] = [
      caps({ customImage: true, ports: 4 }),
      caps({ customImage: true, ports: 4, maxDiskGb: 50 }),
      caps({ startupScript: true, ports: 4, maxDiskGb: 50 }),
      caps({}),
    ];
    let expected = version;
    for (const next of changes) {
      cloud.offers = [cloudOffer({ key: 'moving', capabilities: next })];
      const result = await refresh();
      assert.equal(result.added, 1, JSON.stringify(next));
      assert.equal(await inventoryVersion(ds), ++expected, JSON.stringify(next));
      const after = await row('moving');
      assert.equal(after.id, before.id, 'the id stays');
      assert.deepEqual(offerCapabilities(after), next);
    }
    // Absent capabilities are none: the same as the last listing, so no change.
    cloud.offers = [cloudOffer({ key: 'moving' })];
    assert.equal((await refresh()).added, 0);
  });

  describe('candidates', () => {
    const GPU = 'Capa Test GPU';
    const offers: Record<string, MachineCapabilities> = {
      plain: caps({}),
      image: caps({ customImage: true }),
      script: caps({ startupScript: true }),
      ports: caps({ ports: 2 }),
      disk: caps({ maxDiskGb: 100 }),
      all: caps({ customImage: true, startupScript: true, ports: 5, maxDiskGb: 1000 }),
    };
    let inventory: InventoryService;
    const keyOf = new Map<string, string>();
    before(async () => {
      cloud.offers = Object.entries(offers).map(([key, c], i) =>
        cloudOffer({ key, name: GPU, pricePerHourMinor: 100 * (i + 1), capabilities: c }),
      );
      await refresh();
      for (const key of Object.keys(offers)) keyOf.set((await row(key)).id, key);
      inventory = new InventoryService(createStore(ds), registry, clock, createLogger('silent'), {
        publicBaseUrl: 'http://localhost',
        offerMaxAgeSeconds: 600,
      });
    });

    const keysFor = async (needs: MachineNeeds | undefined, maxHourlyPriceMinor = 1000): Promise<string[]> => {
      const { candidates } = await inventory.intentCandidates(
        { gpuModel: GPU, gpuCount: 1, maxHourlyPriceMinor },
        20,
        needs,
      );
      return candidates.map((o) => keyOf.get(o.id)!);
    };
    const refusal = async (needs: MachineNeeds, maxHourlyPriceMinor = 1000, gpuCount = 1): Promise<string> => {
      try {
        await inventory.intentCandidates({ gpuModel: GPU, gpuCount, maxHourlyPriceMinor }, 20, needs);
      } catch (err) {
        assert.ok(err instanceof AppError);
        assert.equal(err.code, 'NO_MATCHING_OFFER');
        return err.message;
      }
      assert.fail(`no refusal for ${JSON.stringify(needs)}`);
    };

    it('are every offer of the shape when nothing is needed', async () => {
      const every = ['plain', 'image', 'script', 'ports', 'disk', 'all'];
      assert.deepEqual(await keysFor(undefined), every);
      assert.deepEqual(await keysFor(NOTHING), every);
    });

    it('are only the offers that honour each need, and all needs together', async () => {
      const cases: [Partial<MachineNeeds>, string[]][] = [
        [{ customImage: true }, ['image', 'all']],
        [{ startupScript: true }, ['script', 'all']],
        [{ ports: 1 }, ['ports', 'all']],
        [{ ports: 2 }, ['ports', 'all']],
        [{ ports: 3 }, ['all']],
        [{ diskGb: 100 }, ['disk', 'all']],
        [{ diskGb: 101 }, ['all']],
        [{ customImage: true, ports: 2 }, ['all']],
        [{ customImage: true, startupScript: true, ports: 5, diskGb: 1000 }, ['all']],
      ];
      for (const [need, keys] of cases)
        assert.deepEqual(await keysFor({ ...NOTHING, ...need }), keys, JSON.stringify(need));
      // The provision job's read for orders that stored no candidates (written before machine
      // settings existed) asks no capability of the offers.
      const shape = { slugs: [(await row('plain')).slug], gpuCount: 1, maxHourlyPriceMinor: 1000 };
      assert.deepEqual(
        (await cheapestOffersOfShape(ds, shape, 20)).map((o) => o.providerOfferKey),
        Object.keys(offers),
      );
    });

    it('says which machine setting none of the offers can honour', async () => {
      assert.equal(
        await refusal({ customImage: true, startupScript: true, ports: 1, diskGb: 10 }, 150),
        'The one offer of 1 x Capa Test GPU at or under 150 cents per hour cannot honour machine.image (none runs a custom image); ' +
          'machine.startupScript (none runs a startup script); 1 machine.ports (none exposes ports); machine.diskGb of 10 (none lets the disk be chosen). ' +
          "See each offer's capabilities on GET /api/v1/offers?gpu=Capa%20Test%20GPU.",
      );
      assert.match(
        await refusal({ ...NOTHING, ports: 3 }, 550),
        /^None of the 5 offers of 1 x Capa Test GPU at or under 550 cents per hour can honour 3 machine\.ports \(at most 2\)\./,
      );
      assert.match(
        await refusal({ ...NOTHING, diskGb: 500 }, 550),
        /can honour machine\.diskGb of 500 \(at most 100 GB\)\./,
      );
      assert.match(
        await refusal({ ...NOTHING, customImage: true }, 150),
        /cannot honour machine\.image \(none runs a custom image\)\./,
      );
      assert.match(
        await refusal({ ...NOTHING, startupScript: true }, 250),
        /can honour machine\.startupScript \(none runs a startup script\)\./,
      );
      // Each is honoured by some offer under the ceiling, but not by one offer.
      assert.match(
        await refusal({ ...NOTHING, customImage: true, startupScript: true }, 550),
        /^Each of machine\.image, machine\.startupScript is honoured by one of the 5 offers of 1 x Capa Test GPU at or under 550 cents per hour, but no one offer honours them all\./,
      );
    });

    it('gives the reasons it gave before when the model, count or ceiling rules the offers out anyway', async () => {
      assert.match(
        await refusal({ ...NOTHING, customImage: true }, 50),
        /above 50 cents per hour; the cheapest is 100 cents/,
      );
      assert.match(
        await refusal({ ...NOTHING, customImage: true }, 1000, 2),
        /No offer of 2 x Capa Test GPU right now/,
      );
    });
  });
});
