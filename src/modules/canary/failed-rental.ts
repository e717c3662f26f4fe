import type { Store } from '../../db/store.js';
import type { Clock } from '../../clock.js';
import type { Logger } from '../../logger.js';
import type { ProviderRegistry } from '../../providers/provider-registry.js';
import type { CanaryAccountRepos } from './canary-account.js';
import { pause } from './canary-watch.js';

/**
 * Whether the machine of a FAILED rental is gone, in the provider's own word (a FAILED rental is
 * not TERMINATED, so the service verified no destruction): no instance carries its label (or, for
 * a machine the provider never labelled, its instance is gone). The service destroyed it when it
 * failed the rental, and its reconciler (`rental.reconcile`, every minute on any worker) destroys
 * what is left; this waits for that, until `deadline` on the clock or `leave`.
 */
export async function verifyFailedGone(
  deps: { store: Store<CanaryAccountRepos>; clock: Clock; logger: Logger; providers: Pick<ProviderRegistry, 'get'> },
  deploymentId: string,
  deadline: number,
  pollMs: number,
  emit: (phase: string, detail: string) => void,
  leave?: AbortSignal,
): Promise<boolean> {
  const d = await deps.store.read((r) => r.rentals.deployments.find(deploymentId));
  if (!d?.providerId || (!d.label && !d.instanceId)) return true;
  const provider = deps.providers.get(d.providerId);
  let said = false;
  for (;;) {
    try {
      const found = d.label ? await provider.findByLabel(d.label) : await provider.get(d.instanceId!);
      if (!found || found.state === 'gone') {
        emit('gone', `${d.providerId} has no instance of the failed rental: its machine is gone`);
        return true;
      }
      if (!said)
        emit(
          'still_there',
          `${d.providerId} still has instance ${found.instanceId} (${found.state}) of the failed rental: waiting for the service's reconciler to destroy it`,
        );
      said = true;
    } catch (err) {
      deps.logger.warn({ err, deploymentId }, 'canary: asking the provider about a failed rental failed; asking again');
    }
    if (leave?.aborted || deps.clock.now().getTime() > deadline) return false;
    await pause(pollMs, leave);
  }
}
