import { fixtureJson, type QuirkSetting } from './recorded.js';
import { offer, type FakeVastOffer } from './vast-fixtures.js';

/**
 * The Vast.ai deviations from the document that the fake can serve (`test/fixtures/providers/vast/`,
 * rows V1-V6 of `DIFFERENCES.md`). `behaviour: 'recorded'` turns every one on.
 */
export interface VastQuirks {
  [name: string]: QuirkSetting<string | number>;
  /**
   * A taken ask (unknown, no longer rentable, or `noCapacity`) answers HTTP 400 `no_such_ask`
   * instead of the documented 404/410. Forms: `msg` (`create-400-no-such-ask.json`, code inside
   * `msg`) and `error-field` (`create-400-no-such-ask-error-field.json`, the text in `error`).
   */
  takenAsk: QuirkSetting<'msg' | 'error-field'>;
  /**
   * Destroy of an unknown or already destroyed instance answers `no_such_instance` instead of
   * 404 `not_found`: `404` (`destroy-404-no-such-instance.json`) or `200` with `success: false`
   * (`destroy-200-no-such-instance.json`).
   */
  goneInstance: QuirkSetting<'404' | '200'>;
  /**
   * Show-instance of a destroyed instance: `null` (`show-instance-null-after-destroy.json`), `[]`
   * (`show-instance-empty-array-after-destroy.json`) or the object with `actual_status:
   * "destroyed"` (`show-instance-destroyed.json`).
   */
  afterDestroy: QuirkSetting<'null' | 'empty-array' | 'destroyed'>;
  /**
   * Offers carry the traffic prices of `search-offers-raw-rtx4090.json` (0.0 there), and the
   * inventory gains the asks that bill traffic per GB ({@link TRAFFIC_BILLED_OFFERS}: the recorded
   * 0.03 USD/GB each way, and the document's sub-cent prices).
   */
  bandwidthCost: QuirkSetting;
  /** The inventory gains an A100 SXM4 whose instance costs more than its offer ({@link REPRICED_OFFER}). */
  repriced: QuirkSetting;
  /**
   * `GET /api/v1/instances/` pages by this many (2 for `true`) whatever `limit` asks, so a
   * `next_token` page 2 appears with few instances. Paging is documented; no live page was
   * recorded (SOURCES.md), so only the size is this fake's choice.
   */
  smallPages: QuirkSetting<number>;
}

export const VAST_QUIRKS: readonly (keyof VastQuirks & string)[] = [
  'takenAsk',
  'goneInstance',
  'afterDestroy',
  'bandwidthCost',
  'repriced',
  'smallPages',
];

/**
 * Ways an instance's start fails, as Vast reports them (fixtures `show-instance-*.json`):
 * - `oci-failure`: `loading`, then `created` + `intended_status: "running"` with the OCI error in
 *   `status_msg` for good (`show-instance-created-oci-failure.json`);
 * - `manifest-not-found`: the same with docker's "manifest ... not found" for the requested image
 *   (`show-instance-created-manifest-not-found.json`);
 * - `image-pull-failure`: `loading` with `intended_status: "stopped"` and the error in `status_msg`
 *   (`show-instance-loading-intended-stopped.json`), then `exited`;
 * - `host-offline`: `running`, then `offline`.
 * `exited` and `offline` come from the vendor's status table (SOURCES.md), not from a recording.
 */
export type VastStartFailure = 'oci-failure' | 'manifest-not-found' | 'image-pull-failure' | 'host-offline';

interface InstanceFixture {
  id: number;
  status_msg?: string;
  actual_status: string;
  intended_status: string;
}

/** The recorded bodies, read from the fixture files at first use. */
export interface VastRecordedBodies {
  takenAskMsg: Record<string, unknown>;
  takenAskErrorField: Record<string, unknown>;
  gone404: Record<string, unknown>;
  gone200: Record<string, unknown>;
  afterDestroyNull: Record<string, unknown>;
  afterDestroyEmpty: Record<string, unknown>;
  destroyed: InstanceFixture;
  createdOci: InstanceFixture;
  createdManifest: InstanceFixture;
  loadingStopped: InstanceFixture;
  offer: Record<string, unknown>;
  priceIncrease: { new_gpu_costpersec: number; old_gpu_costpersec: number };
}

let bodies: VastRecordedBodies | undefined;

export function vastRecorded(): VastRecordedBodies {
  bodies ??= {
    takenAskMsg: fixtureJson('vast', 'create-400-no-such-ask.json'),
    takenAskErrorField: fixtureJson('vast', 'create-400-no-such-ask-error-field.json'),
    gone404: fixtureJson('vast', 'destroy-404-no-such-instance.json'),
    gone200: fixtureJson('vast', 'destroy-200-no-such-instance.json'),
    afterDestroyNull: fixtureJson('vast', 'show-instance-null-after-destroy.json'),
    afterDestroyEmpty: fixtureJson('vast', 'show-instance-empty-array-after-destroy.json'),
    destroyed: fixtureJson('vast', 'show-instance-destroyed.json'),
    createdOci: fixtureJson('vast', 'show-instance-created-oci-failure.json'),
    createdManifest: fixtureJson('vast', 'show-instance-created-manifest-not-found.json'),
    loadingStopped: fixtureJson('vast', 'show-instance-loading-intended-stopped.json'),
    offer: fixtureJson<Record<string, unknown>[]>('vast', 'search-offers-raw-rtx4090.json')[0],
    priceIncrease: fixtureJson<{ pending_price_increases: VastRecordedBodies['priceIncrease'][] }>(
      'vast',
      'pending-price-increases.json',
    ).pending_price_increases[0],
  };
  return bodies;
}

/**
 * The 400 body for a taken ask. The `msg` form names the ask that was asked for (the fixture's id
 * 999 is the recording's own placeholder); the `error-field` form is served as recorded.
 */
export function takenAskBody(form: 'msg' | 'error-field', askId: number): Record<string, unknown> {
  const r = vastRecorded();
  if (form === 'error-field') return structuredClone(r.takenAskErrorField);
  return { ...r.takenAskMsg, msg: String(r.takenAskMsg.msg).replace(/\b999\b/, String(askId)), ask_id: askId };
}

/** `no_such_instance` for a destroy: status and body of the chosen recorded form. */
export function goneInstanceReply(
  form: '404' | '200',
  instanceId: number,
): { status: number; body: Record<string, unknown> } {
  const r = vastRecorded();
  if (form === '200') return { status: 200, body: structuredClone(r.gone200) };
  return { status: 404, body: { ...r.gone404, msg: String(r.gone404.msg).replace(/\d+/, String(instanceId)) } };
}

/** The bandwidth fields every live offer carries, with the recorded offer's values (0.0). */
export function bandwidthFields(): Pick<
  FakeVastOffer,
  'inet_up_cost' | 'inet_down_cost' | 'internet_up_cost_per_tb' | 'internet_down_cost_per_tb'
> {
  const o = vastRecorded().offer;
  return {
    inet_up_cost: o.inet_up_cost as number,
    inet_down_cost: o.inet_down_cost as number,
    internet_up_cost_per_tb: o.internet_up_cost_per_tb as number,
    internet_down_cost_per_tb: o.internet_down_cost_per_tb as number,
  };
}

/**
 * The recorded offer itself (`search-offers-raw-rtx4090.json`), every field as printed. It has no
 * `verified` boolean (only `verification`); the fake's search derives one, as Vast's does.
 */
export function recordedVastOffer(): FakeVastOffer {
  return structuredClone(vastRecorded().offer) as unknown as FakeVastOffer;
}

/**
 * The recorded ask that bills traffic (`search-offer-traffic-billed-rtx3090.json`): its price,
 * traffic prices, share of the machine, disk and place, under an id of the fake's. Cheaper per
 * hour than the plain RTX 3090 (0.3512), so `dph_total` alone would pick the host that bills every
 * gigabyte. The per-TB prices are 1024 times the per-GB ones, as in the recorded instance.
 */
export const BANDWIDTH_BILLED_OFFER: Readonly<FakeVastOffer> = offer(
  7100009,
  'RTX 3090',
  1,
  24_576,
  0.322777777777778,
  {
    hosting_type: 0,
    geolocation: 'Norway',
    cpu_cores_effective: 4,
    cpu_ram: 128_556,
    gpu_frac: 0.25,
    disk_space: 49.75,
    duration: 688_168.011926413,
    reliability2: 0.9993718,
    storage_cost: 0.2,
    inet_up_cost: 0.03,
    inet_down_cost: 0.03,
    internet_up_cost_per_tb: 30.72,
    internet_down_cost_per_tb: 30.72,
  },
);

/**
 * An ask with the sub-cent per-GB prices of the search document's example offer (0.00456 USD/GB
 * up, 0.00123 down; vendor document, not a capture: SOURCES.md, "Traffic"), on a GPU no other ask
 * of the fake has, so every rental that picks it means to.
 */
export const SUB_CENT_TRAFFIC_OFFER: Readonly<FakeVastOffer> = offer(7100010, 'RTX A5000', 4, 24_576, 0.234567, {
  hosting_type: 0,
  geolocation: 'Utah, US',
  gpu_frac: 0.75,
  inet_up_cost: 0.00456,
  inet_down_cost: 0.00123,
  internet_up_cost_per_tb: 4.66944,
  internet_down_cost_per_tb: 1.25952,
});

/** The asks that bill traffic per GB, which the recorded inventory carries ({@link VastQuirks.bandwidthCost}). */
export const TRAFFIC_BILLED_OFFERS: readonly Readonly<FakeVastOffer>[] = [
  BANDWIDTH_BILLED_OFFER,
  SUB_CENT_TRAFFIC_OFFER,
];

/** An ask whose instance is repriced after accept: cheaper than the default inventory's A100 (1.20), dearer once running. */
export const REPRICED_OFFER: Readonly<FakeVastOffer> = offer(7100008, 'A100 SXM4', 1, 81_920, 0.99, {
  geolocation: 'Oregon, US',
});

/**
 * The instance's `dph_total` after accepting {@link REPRICED_OFFER}: the offer's price plus the
 * GPU increase of `pending-price-increases.json` (0.0001 -> 0.0002 USD/s, i.e. +0.36 USD/h). That
 * fixture shows a host raising a running contract's price; serving the raise at create is this
 * fake's stand-in for "the price after accept is not the offer's".
 */
export function repricedDph(offerDph: number): number {
  const p = vastRecorded().priceIncrease;
  return Math.round((offerDph + (p.new_gpu_costpersec - p.old_gpu_costpersec) * 3600) * 10_000) / 10_000;
}

/**
 * How an instance with a broken start reads, step by step after create: the fields set on it,
 * whether its SSH port is published, and how many boot intervals after the previous step it comes
 * (1 unless said; a host runs a while before it drops off).
 */
export function startFailureSteps(
  kind: VastStartFailure,
  image: string,
): { fields: Record<string, unknown>; running?: boolean; afterBoots?: number }[] {
  const r = vastRecorded();
  const pick = (f: InstanceFixture) => ({
    actual_status: f.actual_status,
    intended_status: f.intended_status,
    status_msg: f.status_msg ?? null,
  });
  switch (kind) {
    case 'oci-failure':
      return [{ fields: { ...pick(r.createdOci), cur_state: 'running', next_state: 'running' } }];
    case 'manifest-not-found': {
      // The recording names its own image; the fake names the one that was asked for.
      const f = pick(r.createdManifest);
      return [
        {
          fields: {
            ...f,
            status_msg: f.status_msg?.replace(/manifest for \S+ not found/, `manifest for ${image} not found`),
            cur_state: 'running',
            next_state: 'running',
          },
        },
      ];
    }
    case 'image-pull-failure':
      return [
        { fields: { ...pick(r.loadingStopped), next_state: 'stopped' } },
        {
          fields: { actual_status: 'exited', intended_status: 'stopped', cur_state: 'stopped', next_state: 'stopped' },
          afterBoots: 10,
        },
      ];
    case 'host-offline':
      return [
        { fields: { actual_status: 'running' }, running: true },
        { fields: { actual_status: 'offline', status_msg: null }, afterBoots: 10 },
      ];
  }
}

/** The `destroyed` object form of show-instance after destroy, over the instance as it was. */
export function destroyedView(inst: object): Record<string, unknown> {
  const { id: _fixtureId, ...fields } = vastRecorded().destroyed;
  return { ...inst, ...fields, ports: null };
}

/** The bodies of `{"instances": null}` and `{"instances": []}` as recorded. */
export function afterDestroyBody(form: 'null' | 'empty-array'): Record<string, unknown> {
  const r = vastRecorded();
  return structuredClone(form === 'null' ? r.afterDestroyNull : r.afterDestroyEmpty);
}
