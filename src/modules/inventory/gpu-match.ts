import { GPU_COUNT_IN_NAME } from '../../vocabulary/machine-hints.js';
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
  unknownSlugOf,
  type GpuCategory,
  type GpuModel,
  type ParsedGpuName,
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
  const slug = unknownSlugOf(p) || 'unknown';
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
  return matchParsed(parseGpuName(query));
}

function matchParsed(p: ParsedGpuName): GpuMatch {
  const compact = [...p.tokens, ...(p.vramGb === null ? [] : [`${p.vramGb}gb`])].join('');
  const named = MODELS_BY_KEY.get(p.key) ?? [];
  // A spelling shared by models of several families ("RTX 6000": Ada and Quadro) means them all.
  const family = new Set(named.map((g) => g.family)).size > 1 ? undefined : FAMILIES_BY_KEY.get(p.key);
  const all = family ? familyModels(family.id) : named;
  const models = p.vramGb === null ? all : all.filter((g) => g.vramGb === p.vramGb);
  if (models.length === 0) return { key: unknownSlugOf(p), slugs: [], known: false, compact };
  let key: string;
  if (models.length === 1) key = models[0].slug;
  else if (family && p.vramGb === null) key = family.id;
  else key = unknownSlugOf(p);
  return { key, slugs: models.map((g) => g.slug), known: true, compact };
}

/** A rental's `gpuModel`, parsed once for its admission and its order. */
export interface GpuIntentName {
  /** The name as matched: without a count written into it ("2x H100" is "H100"), trimmed. */
  name: string;
  /** What the name stands for in the catalog. */
  match: GpuMatch;
  /**
   * A count stated in the name that is not the request's gpuCount: a 422 with the two fields and
   * the body that would do what was probably meant (a stated count is read, never dropped).
   */
  refusal: AppError | null;
}

/** Parses a rental's `gpuModel` once: the name without its count, its catalog match, and whether the count agrees. */
export function gpuIntentName(gpuModel: string, gpuCount: number): GpuIntentName {
  const p = parseGpuName(gpuModel);
  const match = matchParsed(p);
  const { name, count } = p;
  if (count === null) return { name: gpuModel.trim(), match, refusal: null };
  if (count === gpuCount && name !== '') return { name, match, refusal: null };
  const named = name || 'H100';
  const says = Number.isNaN(count)
    ? 'states more than one GPU count'
    : `asks for ${count} GPU${count === 1 ? '' : 's'}`;
  const meant = Number.isNaN(count)
    ? ''
    : `{"gpuModel": ${JSON.stringify(named)}, "gpuCount": ${count}} for ${count}, or `;
  const refusal = new AppError(
    'VALIDATION_FAILED',
    `Invalid request: gpuModel ${JSON.stringify(gpuModel.trim())} ${says} but gpuCount is ${gpuCount}. ${GPU_COUNT_IN_NAME} ` +
      `Next: send ${meant}{"gpuModel": ${JSON.stringify(named)}, "gpuCount": ${gpuCount}} for ${gpuCount}.`,
  );
  return { name: gpuModel.trim(), match, refusal };
}

/** How a rental's GPU was chosen: the exact offer asked for, one model (or its VRAM variants), or any model of a family. */
export type GpuMatchedBy = 'offer' | 'model' | 'family';

const MODELS_BY_NAME: ReadonlyMap<string, GpuModel> = new Map(GPU_MODELS.map((g) => [g.name, g]));

/**
 * How a rental's GPU was chosen, from what its request named (`gpuModel`; null for an offerId
 * rental) and, when the caller has it, what that name matched.
 */
export function gpuMatchedBy(gpuModel: string | null, match?: GpuMatch): GpuMatchedBy {
  if (gpuModel === null) return 'offer';
  match ??= matchGpuQuery(gpuModel);
  return match.known && match.slugs.length > 1 && FAMILIES_BY_KEY.get(match.key)?.id === match.key ? 'family' : 'model';
}

/**
 * Why a rental runs the GPU it runs, for its 201 and every read: `gpuModel` is what the request
 * named (null for an offerId rental), `chosenName` the display name of the offer rented (or tried
 * first; null while it waits for capacity). A family names every model of it, so the note says
 * which one the cheapest offer was and how to name another, suggesting only models in `onSale`:
 * the slugs of the family's models that had an offer the request could rent at admission (its
 * gpuCount, ceiling and machine settings), so each spelling suggested, sent as gpuModel, was
 * admissible. Without `onSale` (a rental admitted before notes were kept) no model is suggested.
 * `parsed` is `gpuModel`'s match when the caller has it (admission), so the name is not parsed again.
 */
export function describeGpuChoice(
  gpuModel: string | null,
  chosenName: string | null,
  onSale?: readonly string[],
  parsed?: GpuMatch,
): { matchedBy: GpuMatchedBy; note: string } {
  if (gpuModel === null)
    return { matchedBy: 'offer', note: 'The offer named by offerId, as asked; it is never substituted.' };
  const match = parsed ?? matchGpuQuery(gpuModel);
  const matchedBy = gpuMatchedBy(gpuModel, match);
  const asked = JSON.stringify(gpuModel);
  const chosen = chosenName === null ? undefined : MODELS_BY_NAME.get(chosenName);
  const cheapest =
    chosenName === null ? '' : ` The cheapest offer was ${chosenName}${chosen ? ` (${chosen.vramGb} GB)` : ''}.`;
  if (!match.known)
    return {
      matchedBy,
      note: `${asked} is not in the catalog; offers of a GPU named the same way were matched.${cheapest}`,
    };
  if (matchedBy === 'family') {
    const family = FAMILIES_BY_KEY.get(match.key)!;
    const taken = chosenName === null ? 'is taken' : 'was taken';
    const advice = familyAdvice(family, chosenName === null, chosen, onSale);
    return {
      matchedBy,
      note: `${asked} names the family ${family.name}, so the cheapest offer of any of its models ${taken}.${cheapest} ${advice}`,
    };
  }
  const names = match.slugs.map((slug) => MODELS_BY_SLUG.get(slug)?.name ?? slug);
  return {
    matchedBy,
    note: `${asked} names ${names.length === 1 ? 'the model' : 'the models'} ${names.join(', ')}.${cheapest}`,
  };
}

/** The request's shape, in the words of its own fields: what an offer had to fit to be on sale for it. */
const FOR_THIS_REQUEST = 'at admission for this gpuCount, price ceiling and machine settings';
const NARROWS = 'naming a model narrows the choice to that model alone.';

/**
 * How to choose within a family once its cheapest offer was taken (`taken`, when the catalog knows
 * its name) or while none is (`waiting`): the other models on sale, by spellings that name them,
 * or that there were none.
 */
function familyAdvice(
  family: { id: string; name: string },
  waiting: boolean,
  taken: GpuModel | undefined,
  onSale: readonly string[] | undefined,
): string {
  if (onSale === undefined)
    return `To choose, name one of its models; GET /api/v1/offers?gpu=${family.id} lists those on sale now.`;
  if (waiting) return `None was on sale ${FOR_THIS_REQUEST}, so the rental waits for one; ${NARROWS}`;
  const others = onSale
    .map((slug) => MODELS_BY_SLUG.get(slug))
    .filter((g): g is GpuModel => g !== undefined && g.family === family.id && g.slug !== taken?.slug);
  if (others.length === 0) return `No other model of ${family.name} was on sale ${FOR_THIS_REQUEST}; ${NARROWS}`;
  // A size spelt on the family ("A100 80GB") names every model of that size, and some of them were on sale.
  const byVram = [...new Set(others.map((g) => g.vramGb))]
    .filter((v) => v !== taken?.vramGb)
    .map((v) => `"${family.name} ${v}GB" for ${v} GB, or `);
  return `To choose, name a model on sale ${FOR_THIS_REQUEST}: ${byVram.join('')}${others.map((g) => `"${g.name}"`).join(', ')}.`;
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
