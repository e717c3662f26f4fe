import type { ProviderPlugin } from '../../src/providers/provider.js';
import { parseLambdaOptions, type LambdaOptions } from './options.js';
import { LambdaProvider } from './provider.js';

const plugin: ProviderPlugin<LambdaOptions> = {
  id: 'lambda',
  description: 'Lambda Cloud on-demand GPU instances (API v1), one registered SSH key per deployment',
  validateOptions: parseLambdaOptions,
  create(options, deps) {
    return new LambdaProvider(options, deps);
  },
};

export default plugin;
