import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import mysql from 'mysql2';
import type { LocalInventoryOffer } from '../../plugins/local/inventory.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import type { SignedUp } from '../helpers/factories.js';
import { credit, offerIds, rent } from '../helpers/rentals.js';

// The rule that keeps the service correct on a multi-primary Galera cluster (docs/operations/galera.md):
// a lock that guards a decision is also a write. A FOR UPDATE lock holds only on its own node, and
// certification rolls back only the later of two transactions that WRITE the same row; so every
// committed transaction that locks rows of a table FOR UPDATE must also write that table. This
// test drives the flows that decide under a lock and checks every transaction they commit.

const LIMITS = { maxPerRentalMinor: 700, budgetLimitMinor: 3000, maxConcurrentDeployments: 2 };
const OFFERS: LocalInventoryOffer[] = [
  {
    key: 'l4',
    name: 'NVIDIA L4',
    category: 'datacenter',
    vramGb: 24,
    gpuCount: 1,
    pricePerHourMinor: 50,
    maximumDurationSeconds: 86400,
  },
];

/** One statement as sent, and how many rows it answered (null for a write, or until it answers). */
interface Sent {
  sql: string;
  rows: number | null;
}

/** The statements of one transaction, as sent on one connection. */
interface Tx {
  statements: Sent[];
  committed: boolean;
}

/** Every transaction each connection of this process runs while `fn` does; a batch of statements is split. */
async function transactionsOf(fn: () => Promise<void>): Promise<Tx[]> {
  const original = mysql.Connection.prototype.query;
  const open = new Map<number, Tx>();
  const done: Tx[] = [];
  mysql.Connection.prototype.query = function (
    this: mysql.Connection & { threadId: number | null },
    ...args: unknown[]
  ) {
    const text = typeof args[0] === 'string' ? args[0] : (args[0] as { sql: string }).sql;
    const id = this.threadId ?? -1;
    const sent: Sent[] = [];
    for (const raw of text.split(';\n')) {
      const s = raw.trim();
      if (/^(START TRANSACTION|BEGIN)\b/i.test(s)) open.set(id, { statements: [], committed: false });
      else if (/^(COMMIT|ROLLBACK)\b/i.test(s)) {
        const tx = open.get(id);
        if (tx) done.push({ ...tx, committed: /^COMMIT/i.test(s) });
        open.delete(id);
      } else {
        const one = { sql: s, rows: null };
        sent.push(one);
        open.get(id)?.statements.push(one);
      }
    }
    // Row counts of the answers: a locking read that found nothing locked nothing.
    const last = args.length - 1;
    if (typeof args[last] === 'function') {
      const cb = args[last] as (err: unknown, result: unknown, ...rest: unknown[]) => unknown;
      const batch = text.split(';\n').length > 1;
      args[last] = (err: unknown, result: unknown, ...rest: unknown[]) => {
        const results = batch && Array.isArray(result) ? result.slice(-sent.length) : [result];
        sent.forEach((x, i) => (x.rows = Array.isArray(results[i]) ? (results[i] as unknown[]).length : null));
        return cb(err, result, ...rest);
      };
    }
    return (original as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof original;
  try {
    await fn();
  } finally {
    mysql.Connection.prototype.query = original;
  }
  return done;
}

/** The table a locking read locked rows of first (the one its FROM names), or null when it locked none. */
function lockedTable(statement: Sent): string | null {
  if (!/\bFOR UPDATE\b/i.test(statement.sql) || /\bSKIP LOCKED\b/i.test(statement.sql) || statement.rows === 0)
    return null;
  return /\bFROM\s+`?(\w+)`?/i.exec(statement.sql)?.[1] ?? null;
}

/** Whether `statement` writes rows of `table`. */
function writes(statement: Sent, table: string): boolean {
  const t = `\`?${table}\`?`;
  return new RegExp(
    `^(UPDATE\\s+${t}\\s|DELETE\\s+FROM\\s+${t}\\s|INSERT\\s+INTO\\s+${t}\\s[\\s\\S]*\\bON DUPLICATE KEY UPDATE\\b)`,
    'i',
  ).test(statement.sql);
}

/** The committed transactions that lock a table FOR UPDATE without writing it, as readable lines. */
function lockWithoutWrite(txs: Tx[]): string[] {
  const bad: string[] = [];
  for (const tx of txs.filter((t) => t.committed)) {
    for (const table of new Set(tx.statements.map(lockedTable).filter((t): t is string => t !== null))) {
      if (!tx.statements.some((s) => writes(s, table)))
        bad.push(`locks ${table} without writing it: ${tx.statements.map((s) => s.sql.slice(0, 60)).join(' | ')}`);
    }
  }
  return bad;
}

describe('a lock that guards a decision is also a write', () => {
  let ctx: TestContext;
  let offer: string;
  before(async () => {
    ctx = await createTestContext({ offers: OFFERS, env: { AGENT_SETUP_RATE_PER_MINUTE: '100000' } });
    offer = (await offerIds(ctx))['l4'];
  });
  after(() => ctx.close());

  async function owner(): Promise<SignedUp> {
    const account = await ctx.services.accounts.findOrCreateTelegramOwner(Math.floor(Math.random() * 1e12), 42);
    await credit(ctx, account.id, 100_000);
    const { key, token } = await ctx.services.accounts.issueOwnerKey(account.id);
    return { accountId: account.id, keyId: key.id, token, auth: { Authorization: `Bearer ${token}` } };
  }

  it('recognizes a transaction that locks a row it does not write, and one that writes it', () => {
    const lock = { sql: 'SELECT id FROM accounts WHERE id = 1 FOR UPDATE', rows: 1 };
    const insert = { sql: 'INSERT INTO `orders` (`id`) VALUES (1)', rows: null };
    const lockOnly: Tx = { committed: true, statements: [lock, insert] };
    const lockAndWrite: Tx = {
      committed: true,
      statements: [
        { sql: 'UPDATE accounts SET lock_version = lock_version + 1 WHERE id = 1', rows: null },
        lock,
        insert,
      ],
    };
    const lockedNothing: Tx = { committed: true, statements: [{ ...lock, rows: 0 }, insert] };
    assert.equal(lockWithoutWrite([lockOnly]).length, 1);
    assert.deepEqual(lockWithoutWrite([lockAndWrite, lockedNothing, { ...lockOnly, committed: false }]), []);
  });

  it('holds in admission, termination, issuing and revoking keys, approving and exchanging setup codes', async () => {
    const o = await owner();
    const txs = await transactionsOf(async () => {
      const rented = await rent(ctx, o, { offerId: offer });
      assert.equal(rented.status, 201, JSON.stringify(rented.body));
      const agent = await ctx.api
        .post('/api/v1/agent-keys')
        .set(o.auth)
        .set('Idempotency-Key', randomUUID())
        .send({ name: 'agent', scopes: ['read', 'rent'], ...LIMITS });
      assert.equal(agent.status, 201, JSON.stringify(agent.body));
      const agentAuth = { Authorization: `Bearer ${agent.body.data.token}` };
      assert.equal(
        (
          await ctx.api
            .post('/api/v1/rentals')
            .set(agentAuth)
            .set('Idempotency-Key', randomUUID())
            .send({ offerId: offer })
        ).status,
        201,
      );
      const begun = await ctx.api.post('/api/v1/agent-authorizations').send({ name: 'session agent' });
      const approve = await ctx.api
        .post('/api/v1/agent-authorizations/approve')
        .set(o.auth)
        .send({ approvalCode: begun.body.data.approvalUrl.split('/').pop(), ...LIMITS });
      assert.equal(approve.status, 200, JSON.stringify(approve.body));
      assert.equal(
        (await ctx.api.post('/api/v1/agent-setups/exchange').send({ setupCode: begun.body.data.setupCode })).status,
        200,
      );
      const ended = await ctx.api.post(`/api/v1/deployments/${rented.body.data.deploymentId}/terminate`).set(o.auth);
      assert.ok(ended.status < 300, JSON.stringify(ended.body));
      assert.equal((await ctx.api.delete(`/api/v1/owner-keys/${o.keyId}`).set(o.auth)).status, 200);
    });
    const locking = txs.filter((t) => t.committed && t.statements.some((s) => lockedTable(s) !== null));
    // Admission (twice), issuing, approving, exchanging, ending a rental and revoking all lock something.
    assert.ok(locking.length >= 7, `only ${locking.length} committed transactions took a lock`);
    assert.ok(locking.some((t) => t.statements.some((s) => lockedTable(s) === 'accounts')));
    assert.deepEqual(lockWithoutWrite(txs), []);
  });
});
