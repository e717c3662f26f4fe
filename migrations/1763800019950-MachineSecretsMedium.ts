import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A rental's sealed machine secrets (its variables and startup script, as JSON) get a MEDIUMBLOB:
 * at their published limits (a 16,384-byte script, 32,768 bytes of variables) JSON may write
 * each control character as a six-byte escape, well past a BLOB's 65,535 bytes, and such a rental
 * was refused with a 500 instead of admitted.
 */
export class MachineSecretsMedium1763800019950 implements MigrationInterface {
  name = 'MachineSecretsMedium1763800019950';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE orders MODIFY machine_secrets_enc MEDIUMBLOB NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE orders MODIFY machine_secrets_enc BLOB NULL`);
  }
}
