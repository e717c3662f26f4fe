import assert from 'node:assert/strict';
import type { Agenda, Job, JobParameters } from 'agenda';
import type { DataSource } from 'typeorm';
import { agendaQueueOf, createAgenda, startAgendaProcessing } from '../../src/jobs/agenda.js';
import { ManualClock } from '../../src/clock.js';
import { JOB_CLAIM_MODES } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import type { AgendaJobQueue } from '../../src/jobs/agenda-job-queue.js';
import { AGENDA_JOBS_TABLE, MysqlJobRepository } from '../../src/jobs/mysql-jobs.repository.js';
import { createTestContext } from '../helpers/context.js';
import { startTestWorker } from '../helpers/jobs.js';
import { waitFor } from '../helpers/wait.js';
import { scratchDatabase } from './scratch-database.js';

const json = (v: unknown) => (typeof v === 'string' ? JSON.parse(v) : v);
const ago = (ms: number) => new Date(Date.now() - ms);
const later = (ms: number) => new Date(Date.now() + ms);

function normal(name: string, nextRunAt: Date | null, extra: Partial<JobParameters> = {}): JobParameters {
  return { name, priority: 0, nextRunAt, type: 'normal', data: {}, ...extra };
}

/**
 * Records what the processor is handed each time it claims a job of `name` from `queue`'s
 * repository. An empty answer means a fill of its queue has just passed over that name: the
 * moment a test may say "nothing was due" or "the start-up poll is over" without a sleep.
 */
function watchClaims(queue: AgendaJobQueue, name: string) {
  const repository = queue.backend.repository;
  const claim = repository.getNextJobToRun.bind(repository);
  const answers: Array<JobParameters | undefined> = [];
  const waiting: Array<() => void> = [];
  repository.getNextJobToRun = async (jobName, ...rest) => {
    const job = await claim(jobName, ...rest);
    if (jobName === name) {
      answers.push(job);
      if (!job) for (const resolve of waiting.splice(0)) resolve();
    }
    return job;
  };
  return {
    answers,
    /** Resolves at the next claim of `name` that comes back empty; ask before what triggers it. */
    nextEmpty: () => new Promise<void>((resolve) => waiting.push(resolve)),
  };
}

/**
 * Runs `then` once Agenda's own stop() has returned inside a worker's stop(), and only after every
 * step that follows it without waiting: a worker that did not wait for running jobs has resolved
 * by then, whatever the machine's load.
 */
function afterAgendaStop(agenda: Agenda, then: () => void): void {
  const stop = agenda.stop.bind(agenda);
  agenda.stop = async (...args) => {
    await stop(...args);
    setImmediate(then);
  };
}

for (const claim of JOB_CLAIM_MODES) {
  describe(`jobs: MySQL backend for Agenda (JOBS_CLAIM=${claim})`, function () {
    this.timeout(30_000);
    let db: Awaited<ReturnType<typeof scratchDatabase>>;
    let ds: DataSource;
    let repo: MysqlJobRepository;
    const started: Agenda[] = [];

    /** A fresh Agenda on the scratch database; stopped after the test. */
    function agendaFor(opts: { processEveryMs?: number; lockLifetimeMs?: number } = {}): {
      agenda: Agenda;
      queue: AgendaJobQueue;
    } {
      const { agenda, queue } = createAgenda(
        ds,
        { jobs: { processEveryMs: opts.processEveryMs ?? 50, claim } },
        {
          defaultLockLifetimeMs: opts.lockLifetimeMs,
        },
      );
      started.push(agenda);
      return { agenda, queue };
    }

    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- raw rows of agenda_jobs, whatever their column types
    async function rows(name: string): Promise<Array<Record<string, any>>> {
      return ds.query(`SELECT * FROM ${AGENDA_JOBS_TABLE} WHERE name = ? ORDER BY id`, [name]);
    }

    before(async () => {
      db = await scratchDatabase();
      ds = db.ds;
      repo = new MysqlJobRepository(ds, { claim });
    });
    afterEach(async () => {
      for (const a of started.splice(0)) await a.stop(false);
      await ds.query(`DELETE FROM ${AGENDA_JOBS_TABLE}`);
    });
    after(async () => {
      await db.drop();
    });

    describe('repository', () => {
      it('saves and reads back every field a job carries', async () => {
        const saved = await repo.saveJob(
          normal('t.fields', later(60_000), {
            priority: 10,
            data: { a: 1, nested: { b: 'x' } },
            repeatInterval: 5000,
            repeatTimezone: 'Europe/Berlin',
            startDate: ago(1000),
            endDate: later(3_600_000),
            skipDays: [0, 6],
          }),
          { lastModifiedBy: 'me' },
        );
        const back = await repo.getJobById(String(saved._id));
        assert.ok(back);
        assert.equal(back.name, 't.fields');
        assert.equal(back.priority, 10);
        assert.deepEqual(back.data, { a: 1, nested: { b: 'x' } });
        assert.equal(back.repeatInterval, 5000);
        assert.equal(back.repeatTimezone, 'Europe/Berlin');
        assert.deepEqual(back.skipDays, [0, 6]);
        assert.equal(back.nextRunAt!.getTime(), saved.nextRunAt!.getTime());
        assert.equal(back.lastModifiedBy, 'me');
        assert.equal(await repo.getJobById('999999999'), null);
        assert.equal(await repo.getJobById('not-an-id'), null);
      });

      it('returns data exactly as saved, whatever JSON it is (strings that look like JSON, numbers, null, dates as ISO)', async () => {
        const when = new Date('2026-01-02T03:04:05.678Z');
        for (const data of ['hello', '123', '{"a":1}', 'null', 42, null, [1, 'x'], { at: when, deep: { s: '"q"' } }]) {
          const saved = await repo.saveJob(normal('t.data', later(60_000), { data }), undefined);
          const back = await repo.getJobById(String(saved._id));
          assert.deepEqual(back!.data, JSON.parse(JSON.stringify(data)), JSON.stringify(data));
        }
        const all = await repo.queryJobs({ name: 't.data' });
        assert.equal(all.total, 8);
        await repo.saveJob(normal('t.data.due', ago(10), { data: 'plain text' }), undefined);
        const claimed = await repo.getNextJobToRun('t.data.due', new Date(), ago(60_000), undefined, undefined);
        assert.equal(claimed!.data, 'plain text');
      });

      it('once claims are stopped, a claim under way releases its job and reports none, and later ones claim nothing', async () => {
        const r = new MysqlJobRepository(ds, { claim });
        const saved = await r.saveJob(normal('t.stop', ago(10)), undefined);
        const locked = async () =>
          (
            (await ds.query(`SELECT locked_at FROM ${AGENDA_JOBS_TABLE} WHERE id = ?`, [String(saved._id)])) as {
              locked_at: Date | null;
            }[]
          )[0].locked_at;
        // Issued before the stop, answered after it: the worker shutdown race.
        const underWay = r.getNextJobToRun('t.stop', new Date(), ago(60_000), undefined, { lastModifiedBy: 'w' });
        await r.stopClaims();
        assert.equal(await underWay, undefined);
        assert.equal(await locked(), null, 'released, not left locked until its lock expires');
        assert.equal(await r.getNextJobToRun('t.stop', new Date(), ago(60_000), undefined, undefined), undefined);
        assert.equal(await locked(), null);
        r.resumeClaims();
        assert.equal(
          String((await r.getNextJobToRun('t.stop', new Date(), ago(60_000), undefined, undefined))?._id),
          String(saved._id),
        );
      });

      it('takes over an abandoned job (lock past its deadline) even behind a standing backlog of due ones', async () => {
        const clock = new ManualClock();
        const r = new MysqlJobRepository(ds, { abandonedScanEveryMs: 300, clock, claim });
        const which = (j: JobParameters | undefined) => (j?.data as { which: string } | undefined)?.which;
        await r.saveJob(normal('t.mixed', ago(600_000), { data: { which: 'abandoned' } }), undefined);
        assert.equal(
          which(await r.getNextJobToRun('t.mixed', new Date(), ago(60_000), ago(300_000), undefined)),
          'abandoned',
        );
        for (let i = 0; i < 3; i++)
          await r.saveJob(normal('t.mixed', ago(1000), { data: { which: `fresh${i}` } }), undefined);
        // Between abandoned-first scans due jobs go first; then, however many are due, the abandoned one.
        assert.equal(
          which(await r.getNextJobToRun('t.mixed', new Date(), ago(60_000), undefined, undefined)),
          'fresh0',
        );
        clock.advance(350);
        assert.equal(
          which(await r.getNextJobToRun('t.mixed', new Date(), ago(60_000), undefined, undefined)),
          'abandoned',
          'locked 5 minutes ago, deadline 1 minute',
        );
        assert.equal(
          which(await r.getNextJobToRun('t.mixed', new Date(), ago(60_000), undefined, undefined)),
          'fresh1',
        );
      });

      it('claims each due job once across concurrent claimers, oldest first', async () => {
        for (let i = 0; i < 10; i++) await repo.saveJob(normal('t.claim', ago(10_000 - i), { data: { i } }), undefined);
        await repo.saveJob(normal('t.claim', later(60_000), { data: { i: 'future' } }), undefined);
        const claims = await Promise.all(
          Array.from({ length: 25 }, () =>
            repo.getNextJobToRun('t.claim', new Date(), ago(60_000), undefined, { lastModifiedBy: 'w' }),
          ),
        );
        const got = claims.filter((c): c is JobParameters => !!c);
        assert.equal(got.length, 10);
        assert.equal(new Set(got.map((j) => String(j._id))).size, 10);
        assert.ok(got.every((j) => (j.data as { i: unknown }).i !== 'future'));
        assert.ok(got.every((j) => j.lockedAt instanceof Date));
        const locked = await ds.query(
          `SELECT COUNT(*) AS n FROM ${AGENDA_JOBS_TABLE} WHERE name = 't.claim' AND locked_at IS NOT NULL`,
        );
        assert.equal(Number(locked[0].n), 10);
      });

      it('gives a job read by a claim that then stalls to exactly one claimer, and the stalled claim the next job', async () => {
        const early = await repo.saveJob(normal('t.stall', ago(2000)), undefined);
        const next = await repo.saveJob(normal('t.stall', ago(1000)), undefined);
        // The first claim halts right after its read of the due jobs (SKIP LOCKED: holding the row
        // lock; update: holding nothing), while a second claim runs from start to end.
        const query = ds.query.bind(ds);
        let halted!: () => void;
        const atHalt = new Promise<void>((r) => (halted = r));
        let resume!: () => void;
        const gate = new Promise<void>((r) => (resume = r));
        let first = true;
        ds.query = (async (sql: string, params?: unknown[], runner?: Parameters<DataSource['query']>[2]) => {
          const result = await query(sql, params, runner);
          if (
            first &&
            /^SELECT [\s\S]* FROM agenda_jobs WHERE name = \? AND disabled = 0 AND locked_at IS NULL/.test(sql)
          ) {
            first = false;
            halted();
            await gate;
          }
          return result;
        }) as DataSource['query'];
        try {
          const stalled = repo.getNextJobToRun('t.stall', new Date(), ago(60_000), undefined, {
            lastModifiedBy: 'stalled',
          });
          await atHalt;
          const quick = await repo.getNextJobToRun('t.stall', new Date(), ago(60_000), undefined, {
            lastModifiedBy: 'quick',
          });
          resume();
          const late = await stalled;
          assert.deepEqual(
            [String(quick?._id), String(late?._id)].sort(),
            [String(early._id), String(next._id)].sort(),
          );
          const r = await rows('t.stall');
          assert.deepEqual(
            r.map((x) => x.last_modified_by).sort(),
            ['quick', 'stalled'],
            'each row claimed by the claim that got it',
          );
          assert.ok(r.every((x) => x.locked_at instanceof Date));
        } finally {
          resume();
          Reflect.deleteProperty(ds, 'query');
        }
      });

      it('claims the earliest job first and, among equal times, the higher priority', async () => {
        const at = ago(5000);
        await repo.saveJob(normal('t.prio', at, { priority: 0, data: { p: 'low' } }), undefined);
        await repo.saveJob(normal('t.prio', at, { priority: 20, data: { p: 'high' } }), undefined);
        await repo.saveJob(normal('t.prio', at, { priority: 10, data: { p: 'mid' } }), undefined);
        await repo.saveJob(normal('t.prio', ago(9000), { priority: -20, data: { p: 'oldest' } }), undefined);
        const order: unknown[] = [];
        for (let i = 0; i < 4; i++)
          order.push(
            (
              (await repo.getNextJobToRun('t.prio', new Date(), ago(60_000), undefined, undefined))!.data as {
                p: string;
              }
            ).p,
          );
        assert.deepEqual(order, ['oldest', 'high', 'mid', 'low']);
      });

      it('takes over a lock only once it is older than the lock deadline', async () => {
        const job = await repo.saveJob(normal('t.expire', ago(1000)), undefined);
        const first = await repo.getNextJobToRun('t.expire', new Date(), ago(60_000), ago(5000), undefined);
        assert.equal(String(first!._id), String(job._id));
        // Locked 5 s ago: a 10 s lifetime still protects it, a 2 s lifetime does not.
        assert.equal(await repo.getNextJobToRun('t.expire', new Date(), ago(10_000), undefined, undefined), undefined);
        const taken = await repo.getNextJobToRun('t.expire', new Date(), ago(2000), undefined, {
          lastModifiedBy: 'other',
        });
        assert.equal(String(taken!._id), String(job._id));
        assert.equal((await rows('t.expire'))[0].last_modified_by, 'other');
      });

      it('locks a specific job only while it is unlocked and unchanged (lockJob)', async () => {
        const job = await repo.saveJob(normal('t.lockjob', ago(100)), undefined);
        assert.ok(await repo.lockJob(job, undefined));
        assert.equal(await repo.lockJob(job, undefined), undefined);
        await repo.unlockJob(job);
        assert.equal(await repo.lockJob({ ...job, nextRunAt: ago(50) }, undefined), undefined);
        assert.ok(await repo.lockJob(job, undefined));
        await repo.unlockJobs([job._id!]);
        assert.equal((await rows('t.lockjob'))[0].locked_at, null);
      });

      it('does not hand out a job scheduled beyond the scan horizon, then does', async () => {
        await repo.saveJob(normal('t.sched', later(400)), undefined);
        assert.equal(await repo.getNextJobToRun('t.sched', new Date(), ago(60_000), undefined, undefined), undefined);
        assert.ok(await repo.getNextJobToRun('t.sched', later(500), ago(60_000), undefined, undefined));
      });

      it('skips disabled jobs until enabled, and filters by name, ids and data', async () => {
        const a = await repo.saveJob(normal('t.dis', ago(100), { data: { tenant: 1 } }), undefined);
        const b = await repo.saveJob(normal('t.dis', ago(100), { data: { tenant: 2 } }), undefined);
        assert.equal(await repo.disableJobs({ name: 't.dis', data: { tenant: 1 } }), 1);
        assert.equal(await repo.disableJobs({}), 0);
        const claimed = await repo.getNextJobToRun('t.dis', new Date(), ago(60_000), undefined, undefined);
        assert.equal(String(claimed!._id), String(b._id));
        assert.equal(await repo.getNextJobToRun('t.dis', new Date(), ago(60_000), undefined, undefined), undefined);
        assert.equal(await repo.enableJobs({ ids: [a._id!] }), 1);
        assert.equal(
          String((await repo.getNextJobToRun('t.dis', new Date(), ago(60_000), undefined, undefined))!._id),
          String(a._id),
        );
      });

      it('removes by id, ids, name, names, notNames and data; never everything by accident', async () => {
        const a = await repo.saveJob(normal('t.rm.a', null, { data: { k: 1 } }), undefined);
        await repo.saveJob(normal('t.rm.a', null, { data: { k: 2 } }), undefined);
        const b = await repo.saveJob(normal('t.rm.b', null), undefined);
        await repo.saveJob(normal('t.rm.c', null), undefined);
        await repo.saveJob(normal('t.rm.d', null), undefined);
        assert.equal(await repo.removeJobs({}), 0);
        assert.equal(await repo.removeJobs({ id: a._id }), 1);
        assert.equal(await repo.removeJobs({ name: 't.rm.a', data: { k: 2 } }), 1);
        assert.equal(await repo.removeJobs({ ids: [b._id!, 'bogus'] }), 1);
        assert.equal(await repo.removeJobs({ names: ['t.rm.c'] }), 1);
        assert.equal(await repo.removeJobs({ notNames: ['t.rm.c'] }), 1);
        assert.deepEqual(await repo.getDistinctJobNames(), []);
      });

      it('reports state, overview and queue size for dashboards', async () => {
        await repo.saveJob(normal('t.q', ago(1000)), undefined);
        await repo.saveJob(normal('t.q', later(60_000)), undefined);
        const done = await repo.saveJob(normal('t.q', null), undefined);
        await repo.saveJobState({ ...done, lastRunAt: ago(500), lastFinishedAt: ago(400) }, undefined);
        assert.equal(await repo.getQueueSize(), 1);
        const all = await repo.queryJobs({ name: 't.q', sort: { nextRunAt: 'asc' } });
        assert.equal(all.total, 3);
        assert.deepEqual(all.jobs.map((j) => j.state).sort(), ['completed', 'queued', 'scheduled']);
        const page = await repo.queryJobs({ name: 't.q', state: 'scheduled' });
        assert.equal(page.total, 1);
        assert.equal((await repo.queryJobs({ search: 't.', limit: 2 })).jobs.length, 2);
        assert.equal((await repo.queryJobs({ search: 'T.Q' })).total, 3, 'search ignores case');
        assert.equal((await repo.queryJobs({ search: '%' })).total, 0, 'search is literal');
        const [overview] = await repo.getJobsOverview();
        assert.equal(overview.name, 't.q');
        assert.equal(overview.total, 3);
        assert.equal(overview.completed, 1);
      });

      it('refuses a unique() field that is not a column, and job state for a vanished job', async () => {
        await assert.rejects(
          repo.saveJob({ ...normal('t.u', null), unique: { 'x; DROP TABLE': 1 } }, undefined),
          /Invalid unique constraint field/,
        );
        await assert.rejects(
          repo.saveJobState({ ...normal('t.u', null), _id: '424242' as JobParameters['_id'] }, undefined),
          /cannot be updated/,
        );
      });

      it('debounces leading (keeps the first run time, takes the newest data) and trailing up to maxWait', async () => {
        // The repository's clock, a second behind the wall clock the assertions read, moves only when told.
        const clock = new ManualClock(new Date(Date.now() - 1000));
        const repo = new MysqlJobRepository(ds, { clock, claim });
        const lead = {
          unique: { 'data.k': 'L' },
          uniqueOpts: { debounce: { delay: 60_000, strategy: 'leading' as const } },
        };
        const first = await repo.saveJob(
          { ...normal('t.lead', new Date(), { data: { k: 'L', n: 1 } }), ...lead },
          undefined,
        );
        await repo.saveJob({ ...normal('t.lead', new Date(), { data: { k: 'L', n: 2 } }), ...lead }, undefined);
        const l = await rows('t.lead');
        assert.equal(l.length, 1);
        assert.equal(json(l[0].data).n, 2);
        assert.equal(l[0].next_run_at.getTime(), first.nextRunAt!.getTime(), 'leading: runs when first asked');

        const trail = { unique: { 'data.k': 'T' }, uniqueOpts: { debounce: { delay: 60_000, maxWait: 200 } } };
        await repo.saveJob({ ...normal('t.trail', new Date(), { data: { k: 'T', n: 1 } }), ...trail }, undefined);
        await repo.saveJob({ ...normal('t.trail', new Date(), { data: { k: 'T', n: 2 } }), ...trail }, undefined);
        assert.ok(
          (await rows('t.trail'))[0].next_run_at.getTime() > Date.now() + 50_000,
          'trailing: pushed back by the delay',
        );
        clock.advance(250);
        await repo.saveJob({ ...normal('t.trail', new Date(), { data: { k: 'T', n: 3 } }), ...trail }, undefined);
        const t = await rows('t.trail');
        assert.equal(t.length, 1);
        assert.ok(t[0].next_run_at.getTime() <= Date.now(), 'maxWait passed: due now');
        assert.equal(t[0].debounce_started_at, null, 'a new debounce cycle starts after the forced run');
      });

      it('updates by _id, hands back a vanished job unchanged, and never unlocks a running job', async () => {
        const job = await repo.saveJob(normal('t.byid', later(60_000), { data: { v: 1 } }), undefined);
        const updated = await repo.saveJob({ ...job, data: { v: 2 }, priority: 5 }, undefined);
        assert.deepEqual(updated.data, { v: 2 });
        assert.equal((await rows('t.byid')).length, 1);
        await repo.removeJobs({ id: String(job._id) });
        const ghost = { ...job, data: { v: 3 } };
        assert.equal(await repo.saveJob(ghost, undefined), ghost);
        assert.equal((await rows('t.byid')).length, 0, 'not re-created');

        const run = await repo.saveJob(normal('t.run', ago(100)), undefined);
        const claimed = await repo.getNextJobToRun('t.run', new Date(), ago(60_000), undefined, undefined);
        await repo.saveJobState({ ...claimed!, nextRunAt: null, lastRunAt: new Date() }, undefined);
        await repo.unlockJob(run);
        assert.ok((await rows('t.run'))[0].locked_at, "running (next_run_at NULL): the lock is the run's");
      });

      it('queries by ids, without disabled jobs, paused only, sorted and paged', async () => {
        const a = await repo.saveJob(normal('t.qq', later(10_000), { priority: 1 }), undefined);
        const b = await repo.saveJob(normal('t.qq', later(20_000), { priority: 2 }), undefined);
        const c = await repo.saveJob(normal('t.qq', later(30_000), { priority: 3, disabled: true }), undefined);
        const ids = (r: { jobs: { _id?: unknown }[] }) => r.jobs.map((j) => String(j._id));
        assert.deepEqual(
          ids(await repo.queryJobs({ ids: [String(a._id), String(c._id)], sort: { nextRunAt: 'asc' } })),
          [String(a._id), String(c._id)],
        );
        assert.deepEqual(
          ids(await repo.queryJobs({ name: 't.qq', includeDisabled: false, sort: { nextRunAt: 'asc' } })),
          [String(a._id), String(b._id)],
        );
        assert.deepEqual(ids(await repo.queryJobs({ name: 't.qq', state: 'paused' })), [String(c._id)]);
        const page = await repo.queryJobs({ name: 't.qq', sort: { nextRunAt: 'desc' }, skip: 1, limit: 1 });
        assert.equal(page.total, 3);
        assert.deepEqual(ids(page), [String(b._id)]);
      });

      it('purges all jobs', async () => {
        await repo.saveJob(normal('t.p1', null), undefined);
        await repo.saveJob(normal('t.p2', ago(1)), undefined);
        assert.equal(await repo.purgeAllJobs(), 2);
        assert.deepEqual(await repo.getDistinctJobNames(), []);
      });
    });

    describe('through the Agenda API', () => {
      it('runs now(), schedule() and failing jobs, recording results on the row', async () => {
        const { agenda } = agendaFor();
        const ran: string[] = [];
        agenda.define('t.run', async (job: Job<{ tag: string }>) => {
          ran.push(job.attrs.data.tag);
        });
        agenda.define('t.fail', async () => {
          throw new Error('boom');
        });
        await agenda.start();
        await agenda.now('t.run', { tag: 'now' });
        await agenda.schedule(later(300), 't.run', { tag: 'scheduled' });
        await agenda.now('t.fail', {});
        await waitFor(async () => ran.length === 2 && (await rows('t.fail'))[0]?.fail_count === 1, {
          timeoutMs: 10_000,
          what: 'jobs to run',
        });
        assert.deepEqual(ran, ['now', 'scheduled']);
        const [failed] = await rows('t.fail');
        assert.equal(failed.fail_reason, 'boom');
        assert.ok(failed.failed_at instanceof Date);
        assert.equal(failed.locked_at, null);
        for (const r of await rows('t.run')) {
          assert.equal(r.next_run_at, null);
          assert.ok(r.last_finished_at instanceof Date);
        }
      });

      it('keeps one row per every() job however often and from however many Agendas it is declared', async () => {
        const a = agendaFor().agenda;
        const b = agendaFor().agenda;
        await Promise.all([
          a.every(60_000, 't.every', { v: 1 }),
          b.every(60_000, 't.every', { v: 2 }),
          a.every(60_000, 't.every', { v: 3 }),
        ]);
        let r = await rows('t.every');
        assert.equal(r.length, 1);
        assert.equal(r[0].type, 'single');
        const firstRun = r[0].next_run_at.getTime();
        await b.every('2 minutes', 't.every', { v: 4 });
        r = await rows('t.every');
        assert.equal(r.length, 1);
        assert.equal(r[0].repeat_interval, '2 minutes');
        assert.deepEqual(json(r[0].data), { v: 4 });
        // Re-declaring a due job keeps its time: a restart does not run it again early.
        assert.equal(r[0].next_run_at.getTime(), firstRun);
        // Normal jobs of the same name are separate rows.
        await a.now('t.every', {});
        assert.equal((await rows('t.every')).length, 2);
      });

      it('repeats an every() job on its interval', async () => {
        const { agenda } = agendaFor();
        let runs = 0;
        agenda.define('t.tick', async () => {
          runs++;
        });
        await agenda.start();
        await agenda.every(150, 't.tick');
        await waitFor(async () => runs >= 3, { timeoutMs: 10_000, what: 'three ticks' });
        assert.equal((await rows('t.tick')).length, 1);
      });

      it('upserts unique() jobs and honours insertOnly', async () => {
        const { agenda } = agendaFor();
        await agenda.create('t.uniq', { user: 7, v: 1 }).unique({ 'data.user': 7 }).schedule(later(60_000)).save();
        await agenda.create('t.uniq', { user: 7, v: 2 }).unique({ 'data.user': 7 }).schedule(later(60_000)).save();
        await agenda.create('t.uniq', { user: 8, v: 1 }).unique({ 'data.user': 8 }).save();
        await agenda.create('t.uniq', { user: 7, v: 3 }).unique({ 'data.user': 7 }, { insertOnly: true }).save();
        const r = await rows('t.uniq');
        assert.equal(r.length, 2);
        assert.deepEqual(json(r[0].data), { user: 7, v: 2 });
      });

      it('debounces unique jobs', async () => {
        const { agenda } = agendaFor();
        await agenda.nowDebounced('t.deb', { k: 'a', n: 1 }, { 'data.k': 'a' }, 60_000);
        await agenda.nowDebounced('t.deb', { k: 'a', n: 2 }, { 'data.k': 'a' }, 60_000);
        const r = await rows('t.deb');
        assert.equal(r.length, 1);
        assert.deepEqual(json(r[0].data), { k: 'a', n: 2 });
        assert.ok(r[0].next_run_at.getTime() > Date.now() + 50_000);
        assert.ok(r[0].debounce_started_at instanceof Date);
      });

      it('runs higher-priority jobs first when several are due', async () => {
        const { agenda } = agendaFor();
        const order: number[] = [];
        agenda.define(
          't.order',
          async (job: Job<{ p: number }>) => {
            order.push(job.attrs.data.p);
          },
          { concurrency: 1 },
        );
        const at = ago(1000);
        for (const p of [1, 5, 3]) await agenda.create('t.order', { p }).priority(p).schedule(at).save();
        await agenda.start();
        await waitFor(async () => order.length === 3, { timeoutMs: 10_000, what: 'three runs' });
        assert.deepEqual(order, [5, 3, 1]);
      });

      it('disables, enables, cancels and purges through Agenda', async () => {
        const { agenda, queue } = agendaFor();
        let runs = 0;
        agenda.define('t.toggle', async () => {
          runs++;
        });
        await agenda.now('t.toggle', {});
        assert.equal(await agenda.disable({ name: 't.toggle' }), 1);
        const claims = watchClaims(queue, 't.toggle');
        const polled = claims.nextEmpty();
        await agenda.start();
        await polled;
        assert.deepEqual(claims.answers.filter(Boolean), [], 'a disabled job is never handed out');
        assert.equal(runs, 0);
        assert.equal(await agenda.enable({ name: 't.toggle' }), 1);
        await waitFor(async () => runs === 1, { timeoutMs: 10_000, what: 'run after enable' });
        await agenda.schedule(later(60_000), 't.cancel', {});
        await agenda.schedule(later(60_000), 't.cancel', {});
        assert.equal(await agenda.cancel({ name: 't.cancel' }), 2);
        await agenda.schedule(later(60_000), 't.undefined', {});
        // purge() removes jobs no definition on this Agenda knows.
        assert.equal(await agenda.purge(), 1);
        assert.deepEqual(await repo.getDistinctJobNames(), ['t.toggle']);
      });

      it('picks up an in-process now() at once, long before the next poll', async () => {
        const { agenda, queue } = agendaFor({ processEveryMs: 60_000 });
        let ran = false;
        agenda.define('t.wake', async () => {
          ran = true;
        });
        const claims = watchClaims(queue, 't.wake');
        const startupPoll = claims.nextEmpty();
        await agenda.start();
        // The start-up poll has passed over t.wake; with a minute to the next, only the notification claims now.
        await startupPoll;
        await queue.now('t.wake', {});
        await waitFor(async () => ran, { timeoutMs: 5_000, what: 'the notified job' });
        assert.equal(claims.answers[0], undefined, 'the start-up poll found nothing');
        assert.deepEqual(
          claims.answers.filter(Boolean).map((j) => j!.name),
          ['t.wake'],
          'claimed once, after the notification',
        );
      });

      it('takes over a job whose runner stopped touching it after its lock lifetime', async () => {
        const { agenda } = agendaFor({ lockLifetimeMs: 400 });
        const ranBy: string[] = [];
        agenda.define(
          't.abandoned',
          async () => {
            ranBy.push('second');
          },
          { lockLifetime: 400 },
        );
        // A claim by a process that then vanished: locked, never finished.
        await repo.saveJob(normal('t.abandoned', ago(1000)), undefined);
        await repo.getNextJobToRun('t.abandoned', new Date(), ago(60_000), undefined, { lastModifiedBy: 'dead' });
        await agenda.start();
        await waitFor(async () => ranBy.length === 1, { timeoutMs: 10_000, what: 'takeover' });
        // The run's finish is written after its handler returns.
        await waitFor(async () => (await rows('t.abandoned'))[0].last_finished_at instanceof Date, {
          what: 'the taken-over run to be recorded as finished',
        });
        const [r] = await rows('t.abandoned');
        assert.equal(r.locked_at, null);
        assert.deepEqual(ranBy, ['second']);
      });

      it('drains on stop: running jobs finish, claimed but unstarted jobs are released', async () => {
        // On the run's shared database through the test helper, which runs startJobWorker.
        const ctx = await createTestContext({ env: { JOBS_CLAIM: claim } });
        const finished: number[] = [];
        let started!: () => void;
        const firstStarted = new Promise<void>((r) => (started = r));
        let release!: () => void;
        const gate = new Promise<void>((r) => (release = r));
        const worker = await startTestWorker(ctx, {
          definitions: [
            {
              name: 't.drain',
              concurrency: 1,
              // Runs until the worker has stopped claiming, so the second job can only wait.
              async handler(data: { n: number }) {
                started();
                await gate;
                finished.push(data.n);
              },
            },
          ],
        });
        const shared = ctx.services.ds;
        const drainRows = () =>
          shared.query(`SELECT * FROM ${AGENDA_JOBS_TABLE} WHERE name = 't.drain' ORDER BY id`) as Promise<
            Awaited<ReturnType<typeof rows>>
          >;
        try {
          await agendaQueueOf(ctx.services.jobs).now('t.drain', { n: 1 });
          await agendaQueueOf(ctx.services.jobs).now('t.drain', { n: 2 });
          await firstStarted;
          afterAgendaStop(worker.agenda, release);
          await worker.stop(5_000);
          assert.equal(finished.length, 1);
          const r = await drainRows();
          assert.equal(r.filter((x) => x.locked_at !== null).length, 0);
          const waiting = r.filter((x) => x.next_run_at !== null);
          assert.equal(waiting.length, 1);
          assert.notEqual(json(waiting[0].data).n, finished[0]);
        } finally {
          await worker.stop();
          await shared.query(`DELETE FROM ${AGENDA_JOBS_TABLE} WHERE name = 't.drain'`);
          await ctx.close();
        }
      });

      it('waits on stop for a job caught between its claim and its start event', async () => {
        const { agenda, queue } = agendaFor();
        const seen: string[] = [];
        agenda.define('t.gap', async () => {
          seen.push('ran');
        });
        // Agenda saves a job's state before it emits 'start': hold that save to widen the gap.
        const repository = queue.backend.repository;
        const save = repository.saveJobState.bind(repository);
        let entered!: () => void;
        const inGap = new Promise<void>((r) => (entered = r));
        let release!: () => void;
        const gate = new Promise<void>((r) => (release = r));
        let first = true;
        repository.saveJobState = async (job, options) => {
          if (job.name === 't.gap' && first) {
            first = false;
            entered();
            await gate;
          }
          return save(job, options);
        };
        const worker = await startAgendaProcessing(queue, createLogger('silent'));
        await agenda.now('t.gap', {});
        await inGap;
        // The held save goes on only once stop() could have returned without waiting.
        afterAgendaStop(agenda, release);
        await worker.stop({ timeoutMs: 10_000 }).then(() => seen.push('stopped'));
        assert.deepEqual(seen, ['ran', 'stopped'], 'stop() waits for the job in the gap');
      });

      it('lets a test worker settle on the jobs its handlers enqueue', async () => {
        const ctx = await createTestContext({ env: { JOBS_CLAIM: claim } });
        const seen: string[] = [];
        const worker = await startTestWorker(ctx, {
          definitions: [
            {
              name: 't.chain.a',
              async handler() {
                seen.push('a');
                await agendaQueueOf(ctx.services.jobs).now('t.chain.b', {});
              },
            },
            {
              name: 't.chain.b',
              async handler() {
                seen.push('b');
              },
            },
          ],
        });
        try {
          await agendaQueueOf(ctx.services.jobs).now('t.chain.a', {});
          await worker.settle();
          assert.deepEqual(seen, ['a', 'b']);
        } finally {
          await worker.stop();
          await ctx.services.ds.query(`DELETE FROM ${AGENDA_JOBS_TABLE} WHERE name IN ('t.chain.a', 't.chain.b')`);
          await ctx.close();
        }
      });
    });

    describe('JobQueue', () => {
      it('keeps one waiting job per unique key, moving it earlier, but queues again behind a running one', async () => {
        const { queue } = agendaFor();
        await queue.schedule(later(60_000), 't.jq', { v: 1 }, { uniqueKey: 'd1' });
        await queue.schedule(later(30_000), 't.jq', { v: 2 }, { uniqueKey: 'd1' });
        await queue.schedule(later(90_000), 't.jq', { v: 3 }, { uniqueKey: 'd1' });
        await queue.now('t.jq', { v: 9 }, { uniqueKey: 'd2' });
        let r = await rows('t.jq');
        assert.equal(r.length, 2);
        assert.deepEqual(json(r[0].data), { v: 3 });
        assert.ok(r[0].next_run_at.getTime() < Date.now() + 40_000);
        // Claimed (running): a new enqueue must not be folded into it.
        await ds.query(`UPDATE ${AGENDA_JOBS_TABLE} SET locked_at = ?, next_run_at = NULL WHERE id = ?`, [
          new Date(),
          r[0].id,
        ]);
        await queue.now('t.jq', { v: 4 }, { uniqueKey: 'd1' });
        r = await rows('t.jq');
        assert.equal(r.length, 3);
        // Plain enqueues never dedupe.
        await queue.now('t.jq', { v: 5 });
        await queue.now('t.jq', { v: 5 });
        assert.equal((await rows('t.jq')).length, 5);
      });

      it('creates a single waiting job when many enqueue the same key at once', async () => {
        const { queue } = agendaFor();
        await Promise.all(Array.from({ length: 20 }, (_, i) => queue.now('t.race', { i }, { uniqueKey: 'same' })));
        assert.equal((await rows('t.race')).length, 1);
      });
    });
  });
}
