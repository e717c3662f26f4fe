import {
  CheckCalls,
  credentialsOf,
  isEdgeRefusal,
  refusedAccess,
  userAgentOf,
  type CheckReading,
} from '../../src/providers/kit/check-calls.js';
import { optionVariable } from '../../src/providers/kit/options.js';
import type { HttpResponse } from '../../src/providers/provider-http.js';
import type { ProviderCheck, ProviderCheckBalance, ProviderCheckOffers } from '../../src/providers/provider-check.js';
import type { VastClient } from './client.js';
import { classifyVastError, describeAnswer, vastErrorCode } from './errors.js';
import {
  isVastOfferDrop,
  mapVastOffer,
  offerSearchBody,
  VAST_DROP_REASONS,
  type VastDropReason,
  type VastOffer,
} from './offers.js';
import type { VastOptions } from './options.js';

/** The current user's call: its answer carries the account's credit (and, per Vast's CLI, the API key: never read or shown). */
const USER_PATH = '/api/v0/users/current/';
const SEARCH_PATH = '/api/v0/bundles/';

const KEY_FIX = `set ${optionVariable('vast', 'API_KEY')} to a personal (not team) key from https://cloud.vast.ai/manage-keys/ (console.vast.ai, Account → Keys)`;

const MALFORMED = 'asks Vast answered without a usable field: nothing to change here; report it if many';

/** What each drop reason means for the operator, or what to change. */
export const VAST_DROP_HINTS: Readonly<Record<VastDropReason, string>> = {
  no_ask_id: MALFORMED,
  no_gpu_name: MALFORMED,
  no_num_gpus: MALFORMED,
  no_dph_total: MALFORMED,
  traffic_price_unreadable: MALFORMED,
  duration_under_an_hour: 'hosts that allow less than an hour: nothing to change',
  traffic_price_above_limit: `raise ${optionVariable('vast', 'MAX_TRAFFIC_PRICE_PER_GB')}, or unset it to list asks whatever their traffic costs`,
};

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A Vast answer as a check reads it: a 200 without `success: false` is read by `value`; the rest by the error table. */
function readVast<T>(name: string, res: HttpResponse, value: (json: unknown) => CheckReading<T>): CheckReading<T> {
  if (res.status === 200 && !(isObject(res.json) && res.json.success === false)) return value(res.json);
  if (isEdgeRefusal(res))
    return { ok: false, errorClass: 'user_agent', detail: `vast ${name}: HTTP 403 from the edge` };
  const rule = classifyVastError(res);
  const errorClass = rule.read === 'gone' ? 'request' : rule.read;
  const code = vastErrorCode(res);
  const detail =
    errorClass === 'auth'
      ? `the API key was refused (HTTP ${res.status}${code ? ` ${code}` : ''})`
      : `${describeAnswer(`vast ${name}`, res)} (${rule.note})`;
  return { ok: false, errorClass, detail };
}

/** The account's credit from the current user's answer, in cents rounded down. */
function creditOf(json: unknown): CheckReading<ProviderCheckBalance> {
  const credit = isObject(json) ? json.credit : undefined;
  if (typeof credit !== 'number' || !Number.isFinite(credit))
    return {
      ok: true,
      value: { amountMinor: null, currency: null, detail: 'the answer carried no credit' },
      detail: 'the key was accepted',
    };
  const amountMinor = Math.floor(Math.round(credit * 1_000_000) / 10_000);
  return {
    ok: true,
    value: {
      amountMinor,
      currency: 'USD',
      detail: 'the credit of the account (Vast is prepaid)',
      ...(amountMinor <= 0
        ? { fix: 'add credit in the Vast console (console.vast.ai, Billing): Vast refuses every create without it' }
        : {}),
    },
    detail: 'the key was accepted',
  };
}

/** How the asks of one search map to offers: {@link mapVastOffer}, the rule `listOffers` uses, counted by reason. */
export function countVastAsks(raw: readonly VastOffer[], options: VastOptions): ProviderCheckOffers {
  const byId = new Map<unknown, VastOffer>();
  for (const o of raw) byId.set(o.id, o);
  const dropped: Record<string, number> = {};
  let parsed = 0;
  for (const o of byId.values()) {
    const m = mapVastOffer(o, options.diskGb, options);
    if (isVastOfferDrop(m)) dropped[m.drop] = (dropped[m.drop] ?? 0) + 1;
    else parsed += 1;
  }
  const hints = Object.fromEntries(VAST_DROP_REASONS.filter((r) => dropped[r]).map((r) => [r, VAST_DROP_HINTS[r]]));
  const full = raw.length >= options.maxOffers;
  return {
    considered: byId.size,
    parsed,
    dropped,
    hints,
    ...(full
      ? {
          detail: `the search stopped at ${optionVariable('vast', 'MAX_OFFERS')} (${options.maxOffers}) asks, cheapest first: raise it to see more of the market`,
        }
      : {}),
  };
}

/**
 * Vast's check, read-only: the current user (the key, and the account's credit), then the offer
 * search `listOffers` sends (a POST that only reads), its asks counted by drop reason.
 */
export async function checkVast(client: VastClient, options: VastOptions): Promise<ProviderCheck> {
  const calls = new CheckCalls();
  const user = await calls.answer(
    `GET ${USER_PATH}`,
    () => client.http.request('account', 'GET', USER_PATH),
    (res) => readVast(`GET ${USER_PATH}`, res, creditOf),
  );
  let offers: ProviderCheckOffers = {
    considered: 0,
    parsed: 0,
    dropped: {},
    hints: {},
    detail: 'not searched: the key was not accepted',
  };
  if (!refusedAccess(user)) {
    const search = await calls.answer(
      `POST ${SEARCH_PATH}`,
      () => client.http.request('offers', 'POST', SEARCH_PATH, { body: offerSearchBody(options) }),
      (res) =>
        readVast(`POST ${SEARCH_PATH}`, res, (json): CheckReading<VastOffer[]> => {
          const asks = isObject(json) ? json.offers : undefined;
          if (!Array.isArray(asks))
            return { ok: false, errorClass: 'bad_response', detail: 'no offers array in the answer' };
          return { ok: true, value: asks.filter(isObject) as unknown as VastOffer[], detail: `${asks.length} asks` };
        }),
      client.http.waitMs('offers'),
    );
    offers = search.ok
      ? countVastAsks(search.value, options)
      : { ...offers, detail: `the offer search failed: ${search.detail}` };
  }
  return {
    calls: calls.calls,
    credentials: credentialsOf(user, KEY_FIX),
    balance: user.ok ? user.value : { amountMinor: null, currency: null, detail: `not read: ${user.detail}` },
    offers,
    userAgent: userAgentOf(calls.calls),
  };
}
