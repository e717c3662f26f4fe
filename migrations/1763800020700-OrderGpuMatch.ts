import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A GPU-intent order keeps what its `gpuModel` matched in the catalog at admission, so
 * provisioning finds offers for it without parsing the name again. Orders admitted before keep
 * NULL; provisioning matches their stored key (`gpu_slug`) instead.
 */
export class OrderGpuMatch1763800020700 implements MigrationInterface {
  name = 'OrderGpuMatch1763800020700';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE orders ADD COLUMN gpu_match JSON NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE orders DROP COLUMN gpu_match`);
  }
}
