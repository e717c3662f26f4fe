import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The drift report (`owner providers drift`, the `drift` counts of `GET /api/v1/providers`): one
 * row per shape of an answer a plugin could not fully read, keyed by provider, kind, the call (a
 * template, or the field a state table reads) and the SHA-256 of the shape's canonical JSON, with
 * the shape itself, its first and last sightings and how many there were. The shape holds keys
 * and types only, never the answer's values.
 */
export class ProviderDrift1763800023400 implements MigrationInterface {
  name = 'ProviderDrift1763800023400';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE provider_drift (
      provider VARCHAR(32) NOT NULL,
      kind VARCHAR(32) NOT NULL,
      call_site VARCHAR(160) NOT NULL,
      shape_hash CHAR(64) NOT NULL,
      shape TEXT NOT NULL,
      first_seen_at DATETIME(3) NOT NULL,
      last_seen_at DATETIME(3) NOT NULL,
      seen BIGINT UNSIGNED NOT NULL,
      PRIMARY KEY (provider, kind, call_site, shape_hash)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE provider_drift`);
  }
}
