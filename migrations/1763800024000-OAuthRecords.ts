import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The authorization server's records (remote MCP's OAuth): clients registered dynamically,
 * interactions, authorization codes, access and refresh tokens, grants and sessions, one row per
 * record of a model. Ids (token values among them) are stored as SHA-256 hashes and every payload
 * sealed with the secrets key, so the table holds no usable credential. An agent authorization
 * session started by a client's `/authorize` remembers that interaction's uid, so its approval
 * finishes the client's flow.
 */
export class OAuthRecords1763800024000 implements MigrationInterface {
  name = 'OAuthRecords1763800024000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE oauth_records (
      model VARCHAR(40) NOT NULL,
      id_hash CHAR(64) NOT NULL,
      grant_hash CHAR(64) NULL,
      uid_hash CHAR(64) NULL,
      user_code_hash CHAR(64) NULL,
      payload MEDIUMBLOB NOT NULL,
      key_id VARCHAR(32) NOT NULL,
      expires_at DATETIME(3) NULL,
      consumed_at DATETIME(3) NULL,
      PRIMARY KEY (model, id_hash),
      KEY oauth_records_grant (grant_hash),
      KEY oauth_records_uid (model, uid_hash),
      KEY oauth_records_user_code (model, user_code_hash),
      KEY oauth_records_expiry (expires_at)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);
    await q.query(
      `ALTER TABLE agent_authorizations ADD COLUMN oauth_interaction_uid VARCHAR(64) NULL, ADD UNIQUE KEY agent_authorizations_oauth_interaction (oauth_interaction_uid)`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(
      `ALTER TABLE agent_authorizations DROP INDEX agent_authorizations_oauth_interaction, DROP COLUMN oauth_interaction_uid`,
    );
    await q.query(`DROP TABLE oauth_records`);
  }
}
