import type { ProviderPlugin } from '../../src/providers/provider.js';
import { parseRunpodOptions, type RunpodOptions } from './options.js';
import { RunpodProvider } from './provider.js';

const plugin: ProviderPlugin<RunpodOptions> = {
  id: 'runpod',
  description:
    "RunPod GPU pods (REST v2): label in the pod name, per-pod key in env.PUBLIC_KEY, direct SSH on 22/tcp, a rental's image, variables, startup script, disk and HTTP ports",
  validateOptions: parseRunpodOptions,
  create(options, deps) {
    return new RunpodProvider(options, deps);
  },
};

export default plugin;
