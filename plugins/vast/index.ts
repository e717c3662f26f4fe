import type { ProviderPlugin } from '../../src/providers/provider.js';
import { validateVastOptions, type VastOptions } from './options.js';
import { VastProvider } from './provider.js';

const plugin: ProviderPlugin<VastOptions> = {
  id: 'vast',
  description: 'Vast.ai on-demand GPU instances (direct SSH as root, key attached per instance)',
  validateOptions: validateVastOptions,
  create(options, deps) {
    return new VastProvider(options, deps);
  },
};

export default plugin;
