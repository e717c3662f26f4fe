import { GPU_COUNT_IN_NAME } from '../../../clients/sdk/src/hints.js';
import { AppError } from '../../errors/app-error.js';
import {
  closestInVram,
  FAMILIES_BY_KEY,
  familyModels,
  GPU_FAMILIES,
  GPU_MODELS,
  MODELS_BY_KEY,
  MODELS_BY_SLUG,
  parseGpuName,
  splitGpuCount,
  unknownGpuSlug,
  type GpuCategory,
  type GpuModel,
} from './gpu-catalog.js';

/** Where a provider's GPU name landed in the catalog. */
export interface ResolvedGpu {
  slug: string;
  /** The catalog's display name, or the provider's own name when the catalog does not know it. */
  name: string;
  family: string;
  /** Null when the catalog does not know the name (the provider's category is kept then). */
  category: GpuCategory | null;
  vramGb: number | null;
  known: boolean;
}

/**
 * The catalog model of a provider's GPU name. A name that leaves the variant open (A100 SXM4,
 * bare H100) is decided by VRAM: the name's own ("80GB") first, else the offer's. A name the
 * catalog does not know keeps a slug of its own, so its offers are still listed and rentable.
 */
export function resolveProviderGpu(name: string, offerVramGb: number | null): ResolvedGpu {
  const p = parseGpuName(name);
  const vram = p.vramGb ?? offerVramGb;
  const family = FAMILIES_BY_KEY.get(p.key);
  const candidates = MODELS_BY_KEY.get(p.key) ?? (family ? familyModels(family.id) : undefined);
  if (candidates?.length) {
    const g = closestInVram(candidates, vram);
    return { slug: g.slug, name: g.name, family: g.family, category: g.category, vramGb: g.vramGb, known: true };
  }
  const slug = unknownGpuSlug(name) || 'unknown';
  return { slug, name: name.trim().slice(0, 100), family: slug, category: null, vramGb: offerVramGb, known: false };
}

/** What a `?gpu=` filter or a rental's `gpuModel` stands for. */
export interface GpuMatch {
  /**
   * Canonical form of the query, stored on GPU-intent orders: a model slug (`h100-sxm`), a
   * family (`h100`), or the query's own tokens (`a100-80gb`). `matchGpuQuery(key)` gives back
   * the same match.
   */
  key: string;
  /** Catalog models the query means; empty when the catalog does not know it. */
  slugs: string[];
  /** False when the catalog does not know the query; it may still name an unknown offered GPU. */
  known: boolean;
  /** The compact form used to compare with slugs of GPUs the catalog does not know. */
  compact: string;
}

/**
 * Matches a customer's spelling: a family ("H100", "nvidia h100", "4090", "A100") means every
 * model of the family, a model ("H100 SXM", "h100-sxm") that model, and a stated VRAM narrows
 * either ("A100 80GB": the SXM4 and PCIe 80 GB parts).
 */
export function matchGpuQuery(query: string): GpuMatch {
  const p = parseGpuName(query);
  const compact = [...p.tokens, ...(p.vramGb === null ? [] : [`${p.vramGb}gb`])].join('');
  const named = MODELS_BY_KEY.get(p.key) ?? [];
  // A spelling shared by models of several families ("RTX 6000": Ada and Quadro) means them all.
  const family = new Set(named.map((g) => g.family)).size > 1 ? undefined : FAMILIES_BY_KEY.get(p.key);
  const all = family ? familyModels(family.id) : named;
  const models = p.vramGb === null ? all : all.filter((g) => g.vramGb === p.vramGb);
  if (models.length === 0) return { key: unknownGpuSlug(query), slugs: [], known: false, compact };
  let key: string;
  if (models.length === 1) key = models[0].slug;
  else if (family && p.vramGb === null) key = family.id;
  else key = unknownGpuSlug(query);
  return { key, slugs: models.map((g) => g.slug), known: true, compact };
}

/**
 * The GPU name of a rental request without a count written into it ("2x H100" is "H100"). A
 * stated count is read, never dropped: it must be the request's gpuCount, else the request is
 * refused (422) with the two fields and the body that would do what was probably meant.
 */
export function gpuIntentName(gpuModel: string, gpuCount: number): string {
  const { name, count } = splitGpuCount(gpuModel);
  if (count === null) return gpuModel.trim();
  if (count === gpuCount && name !== '') return name;
  const named = name || 'H100';
  const says = Number.isNaN(count)
    ? 'states more than one GPU count'
    : `asks for ${count} GPU${count === 1 ? '' : 's'}`;
  const meant = Number.isNaN(count)
    ? ''
    : `{"gpuModel": ${JSON.stringify(named)}, "gpuCount": ${count}} for ${count}, or `;
  throw new AppError(
    'VALIDATION_FAILED',
    `Invalid request: gpuModel ${JSON.stringify(gpuModel.trim())} ${says} but gpuCount is ${gpuCount}. ${GPU_COUNT_IN_NAME} ` +
      `Next: send ${meant}{"gpuModel": ${JSON.stringify(named)}, "gpuCount": ${gpuCount}} for ${gpuCount}.`,
  );
}

/** How a rental's GPU was chosen: the exact offer asked for, one model (or its VRAM variants), or any model of a family. */
export type GpuMatchedBy = 'offer' | 'model' | 'family';

const MODELS_BY_NAME: ReadonlyMap<string, GpuModel> = new Map(GPU_MODELS.map((g) => [g.name, g]));

/**
 * Why a rental runs the GPU it runs, for its 201 and GET: `gpuModel` is what the request named
 * (null for an offerId rental), `chosenName` the display name of the offer rented (or tried first).
 * A family names every model of it, so the note says which one the cheapest offer was and how to
 * name another ("A100" may be the 40 GB part: "A100 80GB" names the 80 GB ones).
 */
export function describeGpuChoice(
  gpuModel: string | null,
  chosenName: string | null,
): { matchedBy: GpuMatchedBy; note: string } {
  if (gpuModel === null)
    return { matchedBy: 'offer', note: 'The offer named by offerId, as asked; it is never substituted.' };
  const asked = JSON.stringify(gpuModel);
  const match = matchGpuQuery(gpuModel);
  const family = FAMILIES_BY_KEY.get(match.key);
  const chosen = chosenName === null ? undefined : MODELS_BY_NAME.get(chosenName);
  const cheapest =
    chosenName === null ? '' : ` The cheapest offer was ${chosenName}${chosen ? ` (${chosen.vramGb} GB)` : ''}.`;
  if (!match.known)
    return {
      matchedBy: 'model',
      note: `${asked} is not in the catalog; offers of a GPU named the same way were matched.${cheapest}`,
    };
  if (family && family.id === match.key && match.slugs.length > 1) {
    const models = familyModels(family.id);
    const others = models.filter((g) => g.slug !== chosen?.slug).map((g) => g.name);
    const otherVram = [...new Set(models.map((g) => g.vramGb))].filter((v) => v !== chosen?.vramGb);
    const byVram = otherVram.length ? `"${family.name} ${otherVram[0]}GB" for ${otherVram[0]} GB, or ` : '';
    return {
      matchedBy: 'family',
      note: `${asked} names the family ${family.name}, so the cheapest offer of any of its models was taken.${cheapest} To choose, name the model: ${byVram}${others.join(', ')}.`,
    };
  }
  const names = match.slugs.map((slug) => MODELS_BY_SLUG.get(slug)?.name ?? slug);
  return {
    matchedBy: 'model',
    note: `${asked} names ${names.length === 1 ? 'the model' : 'the models'} ${names.join(', ')}.${cheapest}`,
  };
}

/** Hyphens and case aside, do these name the same thing? (Unknown GPUs are compared this way.) */
export function compactSlug(slug: string): string {
  return slug.replace(/[^a-z0-9]/g, '');
}

/** The family of a slug in the offers table: the catalog's, or the slug itself for unknown GPUs. */
export function familyOfSlug(slug: string): string {
  return MODELS_BY_SLUG.get(slug)?.family ?? slug;
}

function editDistance(a: string, b: string): number {
  const prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let diag = prev[0];
    prev[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const up = prev[j];
      prev[j] = Math.min(prev[j] + 1, prev[j - 1] + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1));
      diag = up;
    }
  }
  return prev[b.length];
}

/**
 * Known slugs and families nearest to an unknown query (edit distance of compact forms), for
 * error messages. `offered` adds the slugs of GPUs on offer that the catalog does not know.
 */
export function closestGpuSlugs(query: string, offered: Iterable<string> = [], limit = 3): string[] {
  const target = matchGpuQuery(query).compact;
  const names = new Set<string>([...GPU_FAMILIES.map((f) => f.id), ...GPU_MODELS.map((g) => g.slug), ...offered]);
  return [...names]
    .map((s) => ({ s, d: editDistance(target, compactSlug(s)) }))
    .sort((a, b) => a.d - b.d || a.s.length - b.s.length || a.s.localeCompare(b.s))
    .slice(0, limit)
    .map((x) => x.s);
}
