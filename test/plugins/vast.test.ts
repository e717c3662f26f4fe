import { FAKE_VAST_OFFERS } from '../fakes/vast-api.js';
import { makeVastHarness } from './vast-harness.js';
import { runProviderContract } from './provider-contract.js';

runProviderContract('vast', async () => {
  const h = await makeVastHarness();
  return { provider: h.provider, labelPrefix: h.labelPrefix, offer: h.offer(FAKE_VAST_OFFERS[0].id), runningTimeoutMs: 5000, unknownInstanceId: '99999999', cleanup: h.cleanup };
});
