import { dollarsToCents, formatCents, formatUsdPerGb, parseUsdPerGb, type Offer } from '@gpu-rental/sdk';
import type { Command } from 'commander';
import type { Ctx } from '../context.js';
import { table, warnIfCents } from '../output.js';

/** Loose GPU-name match for listing: "h100" finds "NVIDIA H100 SXM"; the server decides for rentals. */
export function gpuMatches(name: string, wanted: string): boolean {
  const norm = (s: string) => s.toLowerCase().replace(/[\s_-]+/g, '');
  return norm(name).includes(norm(wanted));
}

/** What `gpr rent` may set on an offer's machine beyond --env (which every offer takes): "image, script, 5 ports, disk <= 500 GB". */
export function capabilitiesText(o: Offer): string | null {
  const c = o.capabilities;
  if (!c) return null;
  const can = [
    c.customImage ? 'image' : '',
    c.startupScript ? 'script' : '',
    c.ports > 0 ? `${c.ports} port${c.ports === 1 ? '' : 's'}` : '',
    c.maxDiskGb === null ? '' : `disk <= ${c.maxDiskGb} GB`,
  ];
  return can.filter(Boolean).join(', ') || null;
}

export function inventoryCommands(program: Command, ctx: Ctx): void {
  program
    .command('gpus')
    .description('GPU models on offer with their price range (no account needed)')
    .action(async () => {
      const g = await ctx.publicClient().gpus();
      ctx.out(
        g,
        () =>
          table(
            ['model', 'vram', 'offers', 'gpus', 'from/h', 'to/h', 'cheapest offer'],
            g.models.map((m) => [
              m.name,
              m.vramGb === null ? null : `${m.vramGb} GB`,
              m.availableOffers,
              m.availableGpus,
              formatCents(m.minPricePerHourMinor),
              formatCents(m.maxPricePerHourMinor),
              m.cheapestOfferId,
            ]),
          ) + `Prices are for the whole instance per hour. Rent: gpr rent --gpu <model> --max-price <usd>\n`,
      );
    });

  program
    .command('offers')
    .description('Current offers, cheapest first (no account needed)')
    .option('--gpu <name>', 'only GPUs whose name contains this (e.g. H100)')
    .option('--max-price <usd>', 'only offers at or below this price per hour')
    .option('--count <n>', 'only offers with this many GPUs')
    .option(
      '--max-traffic-price <usd>',
      'only offers whose internet traffic costs at most this per GB each way (0: free traffic only)',
    )
    .action(async (o: { gpu?: string; maxPrice?: string; count?: string; maxTrafficPrice?: string }) => {
      if (o.maxPrice !== undefined) warnIfCents('--max-price', o.maxPrice);
      const max = o.maxPrice === undefined ? undefined : dollarsToCents(o.maxPrice);
      const maxTraffic = o.maxTrafficPrice === undefined ? undefined : parseUsdPerGb(o.maxTrafficPrice);
      if (maxTraffic === null)
        throw new RangeError(`--max-traffic-price must be USD per GB such as 0.05, got "${o.maxTrafficPrice}".`);
      const trafficOf = (x: Offer) =>
        Math.max(x.trafficPricePerGb?.upMicroUsd ?? 0, x.trafficPricePerGb?.downMicroUsd ?? 0);
      const offers = (await ctx.publicClient().offers())
        .filter((x: Offer) => (o.gpu ? gpuMatches(x.name, o.gpu) : true))
        .filter((x) => (max === undefined ? true : x.pricePerHourMinor <= max))
        .filter((x) => (maxTraffic === undefined ? true : trafficOf(x) <= maxTraffic))
        .filter((x) => (o.count ? x.gpuCount === Number(o.count) : true))
        .sort((a, b) => a.pricePerHourMinor - b.pricePerHourMinor);
      ctx.out(offers, () =>
        offers.length === 0
          ? 'No offer matches.\n'
          : table(
              ['id', 'gpu', 'count', 'vram', 'price/h', 'traffic up/down', 'max hours', 'machine'],
              offers.map((x) => [
                x.id,
                x.name,
                x.gpuCount,
                x.vramGb === null ? null : `${x.vramGb} GB`,
                formatCents(x.pricePerHourMinor),
                x.trafficPricePerGb
                  ? `${formatUsdPerGb(x.trafficPricePerGb.upMicroUsd)} / ${formatUsdPerGb(x.trafficPricePerGb.downMicroUsd)}`
                  : 'free',
                Math.floor(x.maximumDurationSeconds / 3600),
                capabilitiesText(x),
              ]),
            ),
      );
    });
}
