import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import type { Store } from '../../src/db/store.js';
import type { CredentialsRepository } from '../../src/modules/credentials/credentials.repository.js';
import {
  SEALED_SECRET_KINDS,
  type SealedColumnRepositories,
  type SealedSecretKind,
} from '../../src/modules/credentials/sealed-secrets.js';
import type { RentalStatus } from '../../src/vocabulary/statuses.js';

/** The credentials aggregate, and the sealed columns of the aggregates whose rows hold secrets. */
type CredentialsStore = Store<{ credentials: CredentialsRepository } & SealedColumnRepositories>;

/** A ciphertext and the id of the key that sealed it, as a row stores them. */
export interface SealedValue {
  sealed: Buffer;
  keyId: string;
}

/** A rental as the rentals aggregate would have stored it: its order, its deployment, their sealed columns. */
export interface SeededRental {
  accountId: string;
  keyId: string;
  orderId: string;
  deploymentId: string;
  status: RentalStatus;
  sshKey?: SealedValue;
  machineSecrets?: SealedValue;
}

/** A webhook endpoint as the webhooks aggregate would have stored it. */
export interface SeededEndpoint extends SealedValue {
  id: string;
  accountId: string;
}

/**
 * Writes the rows of other aggregates that the credentials aggregate reads (a deployment to
 * reveal) and rewrites (sealed columns), the way each store keeps them.
 */
export interface CredentialsSeed {
  rental(r: SeededRental): Promise<void>;
  webhookEndpoint(e: SeededEndpoint): Promise<void>;
  /** A receipt signing key's row with its sealed private half (active under no SECRETS_KEY id, so no service signs with it). */
  receiptSigningKey(id: string, value: SealedValue): Promise<void>;
}

/** Where the contract seeds a secret of each kind, by the kind's name. */
const SEEDERS: Record<string, (seed: CredentialsSeed, id: string, value: SealedValue) => Promise<void>> = {
  'deployment SSH private keys': (seed, id, sshKey) =>
    seed.rental({ ...newRental(), deploymentId: id, status: 'TERMINATED', sshKey }),
  'machine variables and startup scripts': (seed, id, machineSecrets) =>
    seed.rental({ ...newRental(), orderId: id, status: 'TERMINATED', machineSecrets }),
  'webhook signing secrets': (seed, id, value) => seed.webhookEndpoint({ id, accountId: randomUUID(), ...value }),
  'receipt signing keys': (seed, id, value) => seed.receiptSigningKey(id, value),
};

function newRental(): Omit<SeededRental, 'status'> {
  return { accountId: randomUUID(), keyId: randomUUID(), orderId: randomUUID(), deploymentId: randomUUID() };
}

const keyIdOf = () => `k${randomBytes(6).toString('hex')}`;
const sealedBytes = () => randomBytes(48);

/**
 * What every store's credentials repository does, run on MariaDB (test/store/) and on the memory
 * store (test/unit/). The sealed secrets are scanned across whole tables, which the MariaDB side
 * shares with the other files of its worker: each test seeds under key ids and row ids of its own
 * (ids that share a random prefix sort together) and reads only those.
 */
export function credentialsContract(
  kind: string,
  make: () => Promise<{ store: CredentialsStore; seed: CredentialsSeed }>,
): void {
  describe(`credentials repository (${kind})`, () => {
    let store: CredentialsStore;
    let seed: CredentialsSeed;
    before(async () => ({ store, seed } = await make()));

    describe('the reveal audit', () => {
      const reveal = (keyId: string, n: number, calledAt: Date) => ({
        deploymentId: randomUUID(),
        accountId: randomUUID(),
        keyId,
        requestId: `req-${n}`,
        calledAt,
      });

      it('keeps one REVEALED row per reveal, oldest first, with string ids', async () => {
        const keyId = randomUUID();
        const t = new Date('2026-05-01T10:00:00.123Z');
        const first = reveal(keyId, 1, t);
        const second = reveal(keyId, 2, new Date(t.getTime() + 5));
        await store.transaction((r) => r.credentials.reveals.insertReveal(first));
        await store.transaction((r) => r.credentials.reveals.insertReveal(second));
        await store.transaction((r) => r.credentials.reveals.insertReveal(reveal(randomUUID(), 3, t)));
        const rows = await store.read((r) => r.credentials.reveals.ofKey(keyId));
        assert.equal(rows.length, 2);
        assert.ok(rows.every((row) => typeof row.id === 'string' && /^\d+$/.test(row.id)));
        assert.ok(Number(rows[0].id) < Number(rows[1].id));
        assert.deepEqual(
          rows.map(({ id: _, ...row }) => ({ ...row })),
          [first, second].map((x) => ({
            ...x,
            outcome: 'REVEALED',
            refusal: null,
            refusalWindow: null,
            refusedCalls: 1,
            lastCalledAt: null,
          })),
        );
        assert.deepEqual(await store.read((r) => r.credentials.reveals.ofKey(randomUUID())), []);
      });

      it('counts refused calls of one key, reason and minute on one row, keeping the first call and moving the last', async () => {
        const keyId = randomUUID();
        const window = new Date('2026-05-01T10:07:00Z');
        const refused = (n: number, refusal: 'NOT_FOUND' | 'NOT_ACTIVE', w = window) => ({
          deploymentId: `d-${n}`,
          accountId: 'a-1',
          keyId,
          requestId: `req-${n}`,
          refusal,
          window: w,
          at: new Date(w.getTime() + n * 1000),
        });
        for (const r of [
          refused(1, 'NOT_FOUND'),
          refused(2, 'NOT_FOUND'),
          refused(3, 'NOT_FOUND'),
          refused(4, 'NOT_ACTIVE'),
          refused(5, 'NOT_FOUND', new Date(window.getTime() + 60_000)),
        ])
          await store.read((repos) => repos.credentials.reveals.countRefused(r));
        const rows = await store.read((r) => r.credentials.reveals.ofKey(keyId));
        assert.deepEqual(
          rows.map((r) => [r.deploymentId, r.requestId, r.outcome, r.refusal, r.refusedCalls]),
          [
            ['d-1', 'req-1', 'REFUSED', 'NOT_FOUND', 3],
            ['d-4', 'req-4', 'REFUSED', 'NOT_ACTIVE', 1],
            ['d-5', 'req-5', 'REFUSED', 'NOT_FOUND', 1],
          ],
        );
        assert.equal(rows[0].refusalWindow?.getTime(), window.getTime());
        assert.equal(rows[0].calledAt.getTime(), window.getTime() + 1000);
        assert.equal(rows[0].lastCalledAt?.getTime(), window.getTime() + 3000);
        assert.equal(rows[2].refusalWindow?.getTime(), window.getTime() + 60_000);
      });

      it('keeps no reveal row of a transaction that throws or ends with ROLLBACK', async () => {
        const keyId = randomUUID();
        await assert.rejects(
          store.transaction(async (r) => {
            await r.credentials.reveals.insertReveal(reveal(keyId, 1, new Date()));
            throw new Error('the reveal failed');
          }),
          /the reveal failed/,
        );
        await store.transaction(async (r, tx) => {
          tx.rollBackAtEnd();
          await r.credentials.reveals.insertReveal(reveal(keyId, 2, new Date()));
        });
        assert.deepEqual(await store.read((r) => r.credentials.reveals.ofKey(keyId)), []);
      });
    });

    describe('the deployment a reveal opens', () => {
      // Finished rentals: on MariaDB, unfinished ones would count against their keys and be swept.
      it('finds a deployment by its id or its rental id, as an agent key sees its own and the owner the whole account', async () => {
        const accountId = randomUUID();
        const mine = { ...newRental(), accountId, status: 'TERMINATED' as const };
        const sibling = { ...newRental(), accountId, status: 'FAILED' as const };
        await seed.rental(mine);
        await seed.rental(sibling);
        const agent = { kind: 'AGENT' as const, accountId, keyId: mine.keyId };
        const owner = { kind: 'OWNER' as const, accountId };
        const found = (viewer: typeof agent | typeof owner, id: string) =>
          store.transaction(async (r) => (await r.credentials.reveals.lockDeploymentFor(viewer, id))?.id ?? null);
        assert.equal(await found(agent, mine.deploymentId), mine.deploymentId);
        assert.equal(await found(agent, mine.orderId), mine.deploymentId);
        assert.equal(await found(agent, sibling.deploymentId), null, "another key's deployment");
        assert.equal(await found(agent, sibling.orderId), null);
        assert.equal(await found(owner, sibling.orderId), sibling.deploymentId);
        assert.equal(await found({ ...owner, accountId: randomUUID() }, mine.deploymentId), null, 'another account');
        assert.equal(await found(owner, randomUUID()), null);
        const d = await store.transaction((r) => r.credentials.reveals.lockDeploymentFor(owner, mine.deploymentId));
        assert.deepEqual([d?.orderId, d?.keyId, d?.status], [mine.orderId, mine.keyId, 'TERMINATED']);
      });
    });

    describe('sealed secrets', () => {
      /** `n` secrets of `kind` under `keyId`, with ids of one random prefix, in id order. */
      async function seedKind(
        kind: SealedSecretKind,
        keyId: string,
        n: number,
        prefix = randomBytes(4).toString('hex'),
      ) {
        const out: { id: string; sealed: Buffer; keyId: string }[] = [];
        for (let i = 0; i < n; i++) {
          const id = `${prefix}-${String(i).padStart(4, '0')}-${randomUUID().slice(0, 22)}`;
          const value = { sealed: sealedBytes(), keyId };
          await SEEDERS[kind.name](seed, id, value);
          out.push({ id, ...value });
        }
        return { prefix, rows: out };
      }

      it('knows where every kind of sealed secret is kept', () => {
        assert.deepEqual(
          SEALED_SECRET_KINDS.map((k) => k.name),
          Object.keys(SEEDERS),
        );
      });

      for (const kind of SEALED_SECRET_KINDS) {
        describe(kind.name, () => {
          it('lists the secrets under other keys than the current one in id order, a page after an id at a time', async () => {
            const old = keyIdOf();
            const current = keyIdOf();
            const prefix = randomBytes(4).toString('hex');
            const { rows } = await seedKind(kind, old, 3, prefix);
            await seedKind(kind, current, 2, prefix);
            const page = (after: string, limit: number) =>
              store.read((r) => kind.column(r).underOtherKeys(current, after, limit));
            const first = await page(prefix, 2);
            assert.deepEqual(first, rows.slice(0, 2));
            assert.ok(first.every((s) => Buffer.isBuffer(s.sealed)));
            const rest = (await page(first[1].id, 1000)).filter((s) => s.id.startsWith(prefix));
            assert.deepEqual(rest, rows.slice(2));
            const all = (await page('', 100_000)).filter((s) => s.id.startsWith(prefix));
            assert.deepEqual(all, rows);
          });

          it('replaces a secret only while it holds what was read, and counts secrets by key', async () => {
            const old = keyIdOf();
            const next = keyIdOf();
            const { prefix, rows } = await seedKind(kind, old, 2);
            const counts = async () => {
              const byKey = await store.read((r) => kind.column(r).countsByKey());
              return [byKey[old] ?? 0, byKey[next] ?? 0];
            };
            assert.deepEqual(await counts(), [2, 0]);
            const fresh = { sealed: sealedBytes(), keyId: next };
            assert.equal(await store.read((r) => kind.column(r).replace(rows[0], fresh)), true);
            // Read before that write: the row no longer holds it.
            assert.equal(await store.read((r) => kind.column(r).replace(rows[0], fresh)), false);
            const otherBytes = { ...rows[1], sealed: sealedBytes() };
            assert.equal(await store.read((r) => kind.column(r).replace(otherBytes, fresh)), false);
            assert.deepEqual(await counts(), [1, 1]);
            const under = await store.read((r) => kind.column(r).underOtherKeys(old, prefix, 1));
            assert.deepEqual(under[0], { id: rows[0].id, ...fresh });
          });
        });
      }
    });
  });
}
