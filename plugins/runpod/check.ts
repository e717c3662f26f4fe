import {
  CheckCalls,
  credentialsOf,
  refusedAccess,
  userAgentOf,
  type CheckReading,
} from '../../src/providers/kit/check-calls.js';
import { optionVariable } from '../../src/providers/kit/options.js';
import type { HttpResponse } from '../../src/providers/provider-http.js';
import type { ProviderCheck, ProviderCheckOffers } from '../../src/providers/provider-check.js';
import type { RunpodClient } from './client.js';
import { answerText, EDGE_PAGE, errorRule, problemDetail } from './errors.js';
import { RUNPOD_GPU_COUNTS, runpodGpuDrop } from './offers.js';
import type { RunpodOptions } from './options.js';

const KEY_FIX = `set ${optionVariable('runpod', 'API_KEY')} to a key from the RunPod console (Settings → API Keys) with Read/Write access to pods`;

/** A catalog entry left out for its shape (`RunpodClient.gpuTypes`), beside the reasons of `runpodGpuDrop`. */
const UNREADABLE = 'unreadable_gpu_type';

/** What each drop reason means for the operator, or what to change. */
function dropHints(cloud: RunpodOptions['cloud']): Record<string, string> {
  return {
    not_in_cloud: `GPU types the ${cloud} cloud does not carry: ${optionVariable('runpod', 'CLOUD')} chooses the cloud`,
    no_stock: 'no stock at that count now: nothing to change',
    no_price: `no price for the ${cloud} cloud in the catalog: nothing to change`,
    [UNREADABLE]: 'catalog entries of a shape the plugin does not read: see owner providers drift, and report it',
  };
}

/** The first page of the pod list, which needs the key: read by the one error table, the edge's page told apart. */
function readPods(res: HttpResponse): CheckReading<null> {
  if (res.status === 200) return { ok: true, value: null, detail: 'the key was accepted (pods readable)' };
  const rule = errorRule(res.status, answerText(res.json, res.text));
  if (rule.match.text === EDGE_PAGE)
    return { ok: false, errorClass: 'user_agent', detail: `runpod GET /v2/pods: HTTP ${res.status} from the edge` };
  const errorClass = rule.read === 'gone' ? 'request' : rule.read;
  const said = problemDetail(res.json, res.text);
  const detail =
    res.status === 401
      ? 'the API key was refused (HTTP 401)'
      : `runpod GET /v2/pods: ${res.status} ${rule.note}${said ? ` (${said})` : ''}`;
  // The account cannot pay: no key would do better.
  return {
    ok: false,
    errorClass,
    detail,
    ...(res.status === 402 ? { fix: 'top the account up in the RunPod console' } : {}),
  };
}

/**
 * RunPod's check, read-only: the first page of the pod list (the key, and the edge), then the GPU
 * catalog at every count `listOffers` reads, each entry counted by why it is not offered. A size
 * a GPU type does not come in is no ask and is not counted. RunPod's API v2 tells no balance.
 */
export async function checkRunpod(client: RunpodClient, options: RunpodOptions): Promise<ProviderCheck> {
  const calls = new CheckCalls();
  const pods = await calls.answer(
    'GET /v2/pods',
    () => client.http.request('pods.read', 'GET', '/v2/pods'),
    readPods,
    client.http.waitMs('pods.read'),
  );
  const offers: ProviderCheckOffers = { considered: 0, parsed: 0, dropped: {}, hints: {} };
  const drop = (code: string) => {
    offers.considered += 1;
    offers.dropped[code] = (offers.dropped[code] ?? 0) + 1;
  };
  const failed: string[] = [];
  if (refusedAccess(pods)) offers.detail = 'not read: the key was not accepted';
  else {
    for (const count of RUNPOD_GPU_COUNTS) {
      const read = await calls.run(
        `GET /v2/catalog/gpus (count ${count})`,
        () => client.gpuTypes(options.cloud, count, () => drop(UNREADABLE)),
        (gpus) => `${gpus.length} GPU types`,
        client.http.waitMs('catalog'),
      );
      if (!read.ok) {
        failed.push(`count ${count}: ${read.detail}`);
        continue;
      }
      for (const gpu of read.value) {
        const why = runpodGpuDrop(gpu, count, options);
        if (why === 'count_above_max') continue;
        if (why) drop(why);
        else {
          offers.considered += 1;
          offers.parsed += 1;
        }
      }
    }
    if (failed.length) offers.detail = `the catalog could not be read at ${failed.join('; ')}`;
  }
  const hints = dropHints(options.cloud);
  offers.hints = Object.fromEntries(Object.keys(offers.dropped).map((code) => [code, hints[code]]));
  return {
    calls: calls.calls,
    credentials: credentialsOf(pods, KEY_FIX),
    offers,
    userAgent: userAgentOf(calls.calls),
  };
}
