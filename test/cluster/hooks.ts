import { createDatabaseIfMissing, dropDatabase } from '../../src/db/data-source.js';
import { clusterDatabase, galera, nodeUrl, stopServices } from './cluster.js';

// The cluster suite's root hooks: a three-node Galera cluster (started unless it runs already),
// one fresh database on it, dropped at the end; the cluster is stopped unless GALERA_KEEP=1.
export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(240_000);
    galera('start');
    await createDatabaseIfMissing(nodeUrl(0));
    process.stdout.write(`  [cluster] database ${clusterDatabase} created on node 1\n`);
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(60_000);
    await stopServices();
    try {
      if (!process.env.KEEP_TEST_DATABASE) await dropDatabase(nodeUrl(0));
    } finally {
      if (!process.env.GALERA_KEEP) galera('stop');
    }
  },
};
