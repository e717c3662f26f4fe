import assert from 'node:assert/strict';
import { createWithLabel, labelLookupFailure, listThenGet, pickByLabel } from '../../src/providers/kit/create-steps.js';
import { ProviderApiError, SharedRead } from '../../src/providers/provider-http.js';
import type { CreateResult } from '../../src/providers/provider.js';

interface Item {
  id: string;
  label: string;
  dead?: boolean;
  at: number;
}

describe('kit: create steps', () => {
  it('gives one verdict for a failed label lookup', () => {
    const kind = (err: unknown) => labelLookupFailure('gpr-1', err).kind;
    assert.equal(kind(new ProviderApiError('rate_limited', 'GET /list: 429', 429, 3000)), 'throttled');
    assert.equal(
      (labelLookupFailure('gpr-1', new ProviderApiError('rate_limited', 'm', 429, 3000)) as { retryAfterMs: number })
        .retryAfterMs,
      3000,
    );
    assert.equal(kind(new ProviderApiError('auth', 'GET /list: 401', 401)), 'rejected');
    assert.equal(kind(new ProviderApiError('request', 'GET /list: 400', 400)), 'rejected');
    // The class travels with the verdict, so /api/v1/providers blames the key only when the key was refused.
    assert.deepEqual(
      ['auth', 'request'].map(
        (c) =>
          (labelLookupFailure('gpr-1', new ProviderApiError(c as 'auth', 'm', 400)) as { errorClass?: string })
            .errorClass,
      ),
      ['auth', 'request'],
    );
    for (const cls of ['unavailable', 'timeout', 'bad_response'] as const)
      assert.equal(kind(new ProviderApiError(cls, 'm')), 'ambiguous', cls);
    assert.equal(kind(new Error('a bug')), 'ambiguous');
    assert.match(labelLookupFailure('gpr-1', new Error('boom')).reason, /labelled gpr-1: boom/);
  });

  it('picks the oldest live instance carrying the label', () => {
    const items: Item[] = [
      { id: 'c', label: 'L', at: 3 },
      { id: 'a', label: 'L', at: 1, dead: true },
      { id: 'b', label: 'L', at: 2 },
      { id: 'd', label: 'M', at: 0 },
    ];
    const spec = {
      labelOf: (i: Item) => i.label,
      live: (i: Item) => !i.dead,
      older: (x: Item, y: Item) => x.at - y.at,
    };
    assert.equal(pickByLabel(items, 'L', spec)?.id, 'b');
    assert.equal(pickByLabel(items, 'N', spec), null);
  });

  it('list-then-get asks for an id only when the shared list lacks it', async () => {
    let lists = 0;
    const asked: string[] = [];
    const shared = new SharedRead(async () => (lists++, [{ id: 'x', label: 'L', at: 0 }]), 60_000);
    const getOne = async (id: string) => (asked.push(id), id === 'y' ? { id: 'y', label: 'L2', at: 1 } : null);
    assert.equal((await listThenGet(shared, 'x', (i: Item) => i.id, getOne))?.id, 'x');
    assert.equal((await listThenGet(shared, 'y', (i: Item) => i.id, getOne))?.id, 'y');
    assert.equal(await listThenGet(shared, 'z', (i: Item) => i.id, getOne), null);
    assert.deepEqual([lists, asked], [1, ['y', 'z']]);
  });

  it('adopts an instance that already carries the label, sending nothing', async () => {
    let sent = 0;
    const res = await createWithLabel({
      label: 'L',
      lookup: async () => ({ id: 'x' }),
      adopt: (i) => ({ kind: 'created', instanceId: i.id }),
      send: async () => (sent++, { kind: 'created', instanceId: 'new' }),
    });
    assert.deepEqual(res, { kind: 'created', instanceId: 'x' });
    assert.equal(sent, 0);
  });

  it('a failed lookup sends nothing and settles with the shared verdict', async () => {
    let sent = 0;
    const settled: CreateResult[] = [];
    const res = await createWithLabel({
      label: 'L',
      lookup: async () => {
        throw new ProviderApiError('auth', 'GET /list: 401', 401);
      },
      adopt: () => ({ kind: 'created', instanceId: 'x' }),
      send: async () => (sent++, { kind: 'created', instanceId: 'new' }),
      settle: (r) => void settled.push(r),
    });
    assert.equal(res.kind, 'rejected');
    assert.equal(sent, 0);
    assert.deepEqual(settled, [res]);
  });

  it('a create without an answer is ambiguous; a created one is not settled', async () => {
    const settled: CreateResult[] = [];
    const base = {
      label: 'L',
      lookup: async () => null,
      adopt: () => ({ kind: 'created', instanceId: 'x' }) as CreateResult,
      settle: (r: CreateResult) => void settled.push(r),
    };
    const lost = await createWithLabel({
      ...base,
      send: async () => {
        throw new ProviderApiError('timeout', 'POST /create: no answer within 30000 ms');
      },
    });
    assert.deepEqual(lost, { kind: 'ambiguous', reason: 'POST /create: no answer within 30000 ms' });
    const made = await createWithLabel({ ...base, send: async () => ({ kind: 'created', instanceId: 'n' }) });
    assert.deepEqual(made, { kind: 'created', instanceId: 'n' });
    assert.deepEqual(settled, [lost]);
  });
});
