import assert from 'node:assert/strict';
import { JOB_CLAIM_MODES } from '../../src/config.js';
import { agendaQueueOf } from '../../src/jobs/agenda.js';
import { AGENDA_JOBS_TABLE } from '../../src/jobs/mysql-jobs.repository.js';
import { createTestContext } from '../helpers/context.js';
import { startTestWorker } from '../helpers/jobs.js';
import { waitFor } from '../helpers/wait.js';
import { sentRequests } from '../helpers/sql-requests.js';

describe('jobs: JOBS_CLAIM', () => {
  for (const claim of JOB_CLAIM_MODES) {
    it(`reaches the service's worker: with ${claim}, claims are ${claim === 'update' ? 'conditional updates and no statement says SKIP LOCKED' : 'SELECT … FOR UPDATE SKIP LOCKED'}`, async () => {
      const ctx = await createTestContext({ env: { JOBS_CLAIM: claim } });
      let ran = 0;
      const worker = await startTestWorker(ctx, {
        definitions: [
          {
            name: 't.claim-mode',
            async handler() {
              ran++;
            },
          },
        ],
      });
      try {
        const { sent } = await sentRequests(async () => {
          await agendaQueueOf(ctx.services.jobs).now('t.claim-mode', {});
          await waitFor(async () => ran === 1, { timeoutMs: 10_000, what: 'the job to run' });
          await worker.settle();
        });
        const skipLocked = sent.filter((sql) => /SKIP\s+LOCKED/i.test(sql));
        const conditional = sent.filter((sql) =>
          /^UPDATE agenda_jobs FORCE INDEX \(PRIMARY\) SET locked_at = \?, last_modified_by = \? WHERE id = \? AND name = \?/.test(
            sql,
          ),
        );
        if (claim === 'update') {
          assert.deepEqual(skipLocked, []);
          assert.ok(conditional.length >= 1, 'the job was taken by a conditional update');
        } else {
          assert.ok(skipLocked.length >= 1, 'the job was taken under SKIP LOCKED');
          assert.deepEqual(conditional, []);
        }
        assert.equal(ran, 1);
      } finally {
        await worker.stop();
        await ctx.services.ds.query(`DELETE FROM ${AGENDA_JOBS_TABLE} WHERE name = 't.claim-mode'`);
        await ctx.close();
      }
    });
  }
});
