import type { ValueTransformer } from 'typeorm';

/**
 * A BIGINT as MySQL returns it (string or number) as a number, refusing values JavaScript cannot
 * hold exactly. Every BIGINT read as a number, through an entity or a raw query, goes through
 * here: cents, and also ids, versions and aggregates such as MIN of a price.
 */
export function readMinor(v: string | number | bigint): number {
  const n = typeof v === 'number' ? v : Number(v);
  if (!Number.isSafeInteger(n)) throw new Error(`BIGINT value ${v} is outside the safe integer range`);
  return n;
}

/** BIGINT column <-> number (cents, Telegram ids), through {@link readMinor}. */
export const minorUnits: ValueTransformer = {
  to: (v: number | null | undefined) => v,
  from: (v: string | number | null) => (v === null || v === undefined ? v : readMinor(v)),
};

/** Comma-separated list column (scopes): small, ordered, indexed nowhere. */
export const csvList: ValueTransformer = {
  to: (v: string[] | null | undefined) => (v == null ? v : v.join(',')),
  from: (v: string | null) => (v == null || v === '' ? [] : v.split(',')),
};
