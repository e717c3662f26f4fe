import { z } from 'zod';
import { success } from './guard.js';
import * as s from './schemas.js';
import { defineTool } from './tool.js';

// The inventory's tools: what is on offer, at what price. No account needed.

export const listGpus = defineTool({
  name: 'list_gpus',
  title: 'List GPU models',
  description:
    'GPU models on offer now, with counts and the price range per hour (USD cents for the whole machine) and the cheapest offer id. No account needed.',
  inputSchema: {},
  outputSchema: { unit: z.string(), models: z.array(s.gpuModel) },
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true },
  run: async (_a, deps) => {
    const g = await deps.client().gpus();
    return success({ unit: g.unit, models: g.models });
  },
});

export const listOffers = defineTool({
  name: 'list_offers',
  title: 'List offers',
  description:
    'Current offers, cheapest first. Filter by GPU name (substring, e.g. "H100"), price ceiling in cents per hour, GPU count. Offer ids change with the inventory.',
  inputSchema: {
    gpu: z.string().max(100).optional().describe('substring of the GPU name, e.g. H100'),
    maxPricePerHourMinor: z.number().int().min(1).optional().describe('USD cents per hour, whole machine'),
    gpuCount: z.number().int().min(1).optional(),
  },
  outputSchema: { offers: z.array(s.offer) },
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true },
  run: async (a, deps) => {
    const norm = (x: string) => x.toLowerCase().replace(/[\s_-]+/g, '');
    const offers = (await deps.client().offers())
      .filter((o) => (a.gpu ? norm(o.name).includes(norm(a.gpu)) : true))
      .filter((o) => (a.maxPricePerHourMinor ? o.pricePerHourMinor <= a.maxPricePerHourMinor : true))
      .filter((o) => (a.gpuCount ? o.gpuCount === a.gpuCount : true))
      .sort((x, y) => x.pricePerHourMinor - y.pricePerHourMinor);
    return success({ offers });
  },
});
