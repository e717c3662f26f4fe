/**
 * The one GPU catalog: every provider's spelling of a GPU resolves here to one model (slug,
 * display name, category, VRAM) and a family. `/gpus`, `?gpu=` and GPU-intent rentals all go
 * through `resolveProviderGpu` / `matchGpuQuery` (gpu-match.ts); nothing else knows GPU names.
 */

export type GpuCategory = 'datacenter' | 'workstation' | 'consumer';

export interface GpuModel {
  /** Stable id of the model, e.g. `h100-sxm`. */
  slug: string;
  /** The one display name of the model, e.g. "H100 SXM". */
  name: string;
  /** The family a bare query ("H100") matches, e.g. `h100`. */
  family: string;
  category: GpuCategory;
  /** VRAM per GPU; decides between variants a name leaves open (A100 40 GB vs 80 GB). */
  vramGb: number;
  /**
   * Extra spellings, written as keys (see `parseGpuName`): the slug's and the name's own keys
   * are added automatically.
   */
  aliases?: string[];
}

export interface GpuFamily {
  id: string;
  name: string;
  /** Extra query keys that mean the whole family ("4090" for rtx-4090). */
  aliases?: string[];
}

const m = (
  slug: string,
  name: string,
  family: string,
  category: GpuCategory,
  vramGb: number,
  aliases: string[] = [],
): GpuModel => ({
  slug,
  name,
  family,
  category,
  vramGb,
  aliases,
});

/**
 * Models, grouped by family. Within a family, the first model wins a tie: a provider that says
 * only "H100" with 80 GB gets the SXM part, the common one.
 */
export const GPU_MODELS: readonly GpuModel[] = [
  // Hopper and Blackwell
  m('h100-sxm', 'H100 SXM', 'h100', 'datacenter', 80, ['h100sxm5', 'h100hbm3', 'h100sxm5hbm3', 'hgxh100']),
  m('h100-pcie', 'H100 PCIe', 'h100', 'datacenter', 80, ['h100pcie5', 'h100hbm2e', 'h100pciehbm2e']),
  m('h100-nvl', 'H100 NVL', 'h100', 'datacenter', 94, ['h100nvlhbm3']),
  m('h200-sxm', 'H200 SXM', 'h200', 'datacenter', 141, ['h200sxm5', 'h200hbm3e', 'hgxh200']),
  m('h200-nvl', 'H200 NVL', 'h200', 'datacenter', 141),
  m('gh200', 'GH200', 'gh200', 'datacenter', 96, ['gh200superchip', 'gh200grace']),
  m('b200', 'B200', 'b200', 'datacenter', 180, ['b200sxm6', 'hgxb200', 'dgxb200']),
  m('gb200', 'GB200', 'gb200', 'datacenter', 186, ['gb200nvl72']),
  // Ampere datacenter
  m('a100-sxm4-80gb', 'A100 SXM4 80GB', 'a100', 'datacenter', 80, ['a100sxm']),
  m('a100-sxm4-40gb', 'A100 SXM4 40GB', 'a100', 'datacenter', 40, ['a100sxm']),
  m('a100-pcie-80gb', 'A100 PCIe 80GB', 'a100', 'datacenter', 80),
  m('a100-pcie-40gb', 'A100 PCIe 40GB', 'a100', 'datacenter', 40),
  m('a40', 'A40', 'a40', 'datacenter', 48),
  m('a10', 'A10', 'a10', 'datacenter', 24),
  m('a10g', 'A10G', 'a10g', 'datacenter', 24),
  // Ada and Turing datacenter
  m('l40s', 'L40S', 'l40s', 'datacenter', 48),
  m('l40', 'L40', 'l40', 'datacenter', 48),
  m('l4', 'L4', 'l4', 'datacenter', 24),
  m('t4', 'T4', 't4', 'datacenter', 16),
  // Volta
  m('v100-32gb', 'V100 32GB', 'v100', 'datacenter', 32, ['v100sxm2', 'v100pcie', 'v100s']),
  m('v100-16gb', 'V100 16GB', 'v100', 'datacenter', 16, ['v100sxm2', 'v100pcie']),
  // AMD
  m('mi300x', 'MI300X', 'mi300x', 'datacenter', 192, ['mi300xoam']),
  m('mi250', 'MI250', 'mi250', 'datacenter', 128, ['mi250x']),
  // Workstation
  m('rtx-pro-6000', 'RTX PRO 6000', 'rtx-pro-6000', 'workstation', 96, [
    'rtxpro6000blackwell',
    'rtxpro6000blackwellserveredition',
    'rtxpro6000blackwellworkstationedition',
    'rtxpro6000se',
    'rtxpro6000we',
  ]),
  m('rtx-6000-ada', 'RTX 6000 Ada', 'rtx-6000-ada', 'workstation', 48, ['rtx6000', 'rtx6000adageneration', '6000ada']),
  // Lambda's gpu_1x_rtx6000 is the 24 GB Turing card; VRAM tells it from the Ada one.
  m('quadro-rtx-6000', 'Quadro RTX 6000', 'quadro-rtx-6000', 'workstation', 24, ['rtx6000']),
  m('rtx-a6000', 'RTX A6000', 'rtx-a6000', 'workstation', 48, ['a6000']),
  m('rtx-a5000', 'RTX A5000', 'rtx-a5000', 'workstation', 24, ['a5000']),
  m('rtx-a4000', 'RTX A4000', 'rtx-a4000', 'workstation', 16, ['a4000']),
  // Consumer
  m('rtx-5090', 'RTX 5090', 'rtx-5090', 'consumer', 32),
  m('rtx-4090', 'RTX 4090', 'rtx-4090', 'consumer', 24),
  m('rtx-4080', 'RTX 4080', 'rtx-4080', 'consumer', 16, ['rtx4080super']),
  m('rtx-3090', 'RTX 3090', 'rtx-3090', 'consumer', 24, ['rtx3090ti']),
  m('rtx-3080', 'RTX 3080', 'rtx-3080', 'consumer', 10),
];

/** Families with a display name and the query words that mean all their models. */
export const GPU_FAMILIES: readonly GpuFamily[] = [
  { id: 'h100', name: 'H100' },
  { id: 'h200', name: 'H200' },
  { id: 'gh200', name: 'GH200' },
  { id: 'b200', name: 'B200' },
  { id: 'gb200', name: 'GB200' },
  { id: 'a100', name: 'A100' },
  { id: 'a40', name: 'A40' },
  { id: 'a10', name: 'A10' },
  { id: 'a10g', name: 'A10G' },
  { id: 'l40s', name: 'L40S' },
  { id: 'l40', name: 'L40' },
  { id: 'l4', name: 'L4' },
  { id: 't4', name: 'T4' },
  { id: 'v100', name: 'V100' },
  { id: 'mi300x', name: 'MI300X' },
  { id: 'mi250', name: 'MI250' },
  { id: 'rtx-pro-6000', name: 'RTX PRO 6000', aliases: ['pro6000'] },
  { id: 'rtx-6000-ada', name: 'RTX 6000 Ada', aliases: ['6000ada'] },
  { id: 'quadro-rtx-6000', name: 'Quadro RTX 6000' },
  { id: 'rtx-a6000', name: 'RTX A6000', aliases: ['a6000'] },
  { id: 'rtx-a5000', name: 'RTX A5000', aliases: ['a5000'] },
  { id: 'rtx-a4000', name: 'RTX A4000', aliases: ['a4000'] },
  { id: 'rtx-5090', name: 'RTX 5090', aliases: ['5090'] },
  { id: 'rtx-4090', name: 'RTX 4090', aliases: ['4090'] },
  { id: 'rtx-4080', name: 'RTX 4080', aliases: ['4080'] },
  { id: 'rtx-3090', name: 'RTX 3090', aliases: ['3090'] },
  { id: 'rtx-3080', name: 'RTX 3080', aliases: ['3080'] },
];

/** Words that say who made the card, not which card it is. */
const VENDOR_WORDS = new Set(['nvidia', 'geforce', 'tesla', 'quadro', 'amd', 'radeon', 'instinct', 'intel']);

export interface ParsedGpuName {
  /** The name without a GPU count written into it, spacing tidied ("2x H100 SXM" is "H100 SXM"). */
  name: string;
  /** Significant tokens, lower-case, without vendor words, instance-count and VRAM tokens. */
  tokens: string[];
  /** The tokens joined: the lookup key ("h100sxm", "a100pcie"). */
  key: string;
  /** VRAM the name states ("80GB", "40 GB"), if any. */
  vramGb: number | null;
  /** GPUs the name states ("2x H100", "gpu_8x_h100", "H100 x2"), if any; see {@link splitGpuCount}. */
  count: number | null;
}

/**
 * A number of GPUs written into a name: "2x", "2 x", "2×" or "2*" before the model ("8xH100",
 * "gpu_8x_h100"), or a lower-case "x2" / "x 2" of 1, 2, 4 or 8 ending it ("H100 x2"). The digits
 * must stand apart from the model's own ("MI300X" and "RTX 6000 x 2" keep their 300 and 6000),
 * and a model may end in "X9" ("Acme X9"), so the end is read narrowly.
 */
const COUNT_IN_NAME =
  /(^|[^A-Za-z0-9])(\d{1,3})\s*[xX×*](?=\s*[A-Za-z]|[^A-Za-z0-9]|$)|(^|[^A-Za-z0-9])[x×*]\s*([1248])\s*$/g;

/**
 * Takes the GPU count out of a name: the name without it (spacing tidied) and the count, null
 * when the name states none. Names that state different counts ("2x H100 x4") give NaN.
 */
export function splitGpuCount(name: string): { name: string; count: number | null } {
  const counts = new Set<number>();
  const rest = name.replace(
    COUNT_IN_NAME,
    (
      _m,
      before1: string | undefined,
      lead: string | undefined,
      before2: string | undefined,
      trail: string | undefined,
    ) => {
      counts.add(Number(lead ?? trail));
      return `${before1 ?? before2 ?? ''} `;
    },
  );
  const count = counts.size === 0 ? null : counts.size === 1 ? [...counts][0] : Number.NaN;
  return { name: rest.replace(/\s+/g, ' ').replace(/^[\s_-]+|[\s_-]+$/g, ''), count };
}

/**
 * Splits a GPU name as any provider or customer writes it: "NVIDIA A100-SXM4-80GB",
 * "A100 (40 GB SXM4)", "gpu_8x_h100_sxm5" and "rtx4090" all parse to a key and maybe a VRAM.
 */
export function parseGpuName(name: string): ParsedGpuName {
  const { name: rest, count } = splitGpuCount(name);
  const text = rest.toLowerCase().replace(/(\d+)\s*gb\b/g, '$1gb');
  const tokens: string[] = [];
  let vramGb: number | null = null;
  for (const t of text.split(/[^a-z0-9]+/)) {
    if (!t || VENDOR_WORDS.has(t) || t === 'gpu' || t === 'gpus') continue;
    const vram = /^(\d+)gb$/.exec(t);
    if (vram) {
      vramGb = Number(vram[1]);
      continue;
    }
    tokens.push(t);
  }
  return { name: rest, tokens, key: tokens.join(''), vramGb, count };
}

/** The slug of a parsed name the catalog does not know: its tokens, VRAM included, hyphenated. */
export function unknownSlugOf(p: ParsedGpuName): string {
  return [...p.tokens, ...(p.vramGb === null ? [] : [`${p.vramGb}gb`])].join('-').slice(0, 100);
}

function indexBy<T>(items: readonly T[], keysOf: (item: T) => string[]): Map<string, T[]> {
  const index = new Map<string, T[]>();
  for (const item of items) {
    for (const k of new Set(keysOf(item))) {
      if (!k) continue;
      const list = index.get(k) ?? [];
      list.push(item);
      index.set(k, list);
    }
  }
  return index;
}

/** Keys of a model: its slug's, its name's and its aliases. */
export const MODELS_BY_KEY: ReadonlyMap<string, GpuModel[]> = indexBy(GPU_MODELS, (g) => [
  parseGpuName(g.slug).key,
  parseGpuName(g.name).key,
  ...(g.aliases ?? []),
]);

export const FAMILIES_BY_KEY: ReadonlyMap<string, GpuFamily> = new Map(
  [
    ...indexBy(GPU_FAMILIES, (f) => [parseGpuName(f.id).key, parseGpuName(f.name).key, ...(f.aliases ?? [])]).entries(),
  ].map(([k, v]) => [k, v[0]]),
);

export const MODELS_BY_SLUG: ReadonlyMap<string, GpuModel> = new Map(GPU_MODELS.map((g) => [g.slug, g]));

export function familyModels(family: string): GpuModel[] {
  return GPU_MODELS.filter((g) => g.family === family);
}

/** The candidate closest in VRAM to `vramGb`; the first listed on a tie or when VRAM is unknown. */
export function closestInVram(candidates: GpuModel[], vramGb: number | null): GpuModel {
  if (vramGb === null) return candidates[0];
  let best = candidates[0];
  for (const c of candidates) if (Math.abs(c.vramGb - vramGb) < Math.abs(best.vramGb - vramGb)) best = c;
  return best;
}
