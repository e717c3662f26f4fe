import type { ValueTransformer } from 'typeorm';

/** BIGINT cents <-> number, refusing values JavaScript cannot hold exactly. */
export const minorUnits: ValueTransformer = {
  to: (v: number | null | undefined) => v,
  from: (v: string | number | null) => {
    if (v === null || v === undefined) return v;
    const n = typeof v === 'number' ? v : Number(v);
    if (!Number.isSafeInteger(n)) throw new Error(`money value ${v} is outside the safe integer range`);
    return n;
  },
};

/** Comma-separated list column (scopes): small, ordered, indexed nowhere. */
export const csvList: ValueTransformer = {
  to: (v: string[] | null | undefined) => (v == null ? v : v.join(',')),
  from: (v: string | null) => (v == null || v === '' ? [] : v.split(',')),
};

