import { createDatabaseIfMissing, dropDatabase } from '../../src/db/data-source.js';
import {
  clusterDatabase,
  galera,
  markServiceOutput,
  newServiceOutput,
  nodeUrl,
  saveServiceOutput,
  stopServices,
} from './cluster.js';

// The cluster suite's root hooks: a three-node Galera cluster (started unless it runs already),
// one fresh database on it, dropped at the end; the cluster is stopped unless GALERA_KEEP=1.
// A failed test prints the last lines each service process wrote during it; every process's whole
// output is kept under LOG_DIR.
export const mochaHooks = {
  beforeEach() {
    markServiceOutput();
  },
  afterEach(this: Mocha.Context) {
    if (this.currentTest?.state !== 'failed') return;
    const out = newServiceOutput();
    process.stdout.write(
      out
        ? `  [cluster] service output during "${this.currentTest.title}":\n${out}\n`
        : '  [cluster] the service processes wrote nothing during the failed test\n',
    );
  },
  async beforeAll(this: Mocha.Context) {
    this.timeout(240_000);
    galera('start');
    await createDatabaseIfMissing(nodeUrl(0));
    process.stdout.write(`  [cluster] database ${clusterDatabase} created on node 1\n`);
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(60_000);
    await stopServices();
    process.stdout.write(`  [cluster] service logs in ${saveServiceOutput()}\n`);
    try {
      if (!process.env.KEEP_TEST_DATABASE) await dropDatabase(nodeUrl(0));
    } finally {
      if (!process.env.GALERA_KEEP) galera('stop');
    }
  },
};
