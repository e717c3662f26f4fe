import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Machines agents can work with. Offers say what their machines can be given (a custom image, a
 * startup script, how many ports, the largest disk). A rental keeps the machine settings it asked
 * for: the image, the variable names, ports and disk in the clear; the variables' values and the
 * script sealed like SSH keys (only the script's hash is readable). Deployments show the phase of
 * provisioning they are in, the endpoints of their exposed ports, and their lease; a rental of
 * GPU intent may wait for capacity until a deadline. Keys may carry a longest rental, and so may
 * the setup codes that mint them.
 */
export class MachineSettings1763800012000 implements MigrationInterface {
  name = 'MachineSettings1763800012000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE offers
      ADD COLUMN cap_custom_image TINYINT(1) NOT NULL DEFAULT 0,
      ADD COLUMN cap_startup_script TINYINT(1) NOT NULL DEFAULT 0,
      ADD COLUMN cap_ports INT NOT NULL DEFAULT 0,
      ADD COLUMN cap_max_disk_gb INT NULL`);
    await q.query(`ALTER TABLE orders
      ADD COLUMN machine_image VARCHAR(512) NULL,
      ADD COLUMN machine_env_names JSON NULL,
      ADD COLUMN machine_ports JSON NULL,
      ADD COLUMN machine_disk_gb INT NULL,
      ADD COLUMN machine_secrets_enc BLOB NULL,
      ADD COLUMN machine_secrets_kid VARCHAR(32) NULL,
      ADD COLUMN startup_script_sha256 CHAR(64) NULL,
      ADD COLUMN terminate_after_seconds INT NULL,
      ADD COLUMN wait_for_capacity_until DATETIME(3) NULL`);
    await q.query(`ALTER TABLE deployments
      ADD COLUMN phase VARCHAR(32) NULL,
      ADD COLUMN phase_since DATETIME(3) NULL,
      ADD COLUMN endpoints JSON NULL,
      ADD COLUMN lease_seconds INT NULL`);
    await q.query(`ALTER TABLE api_keys ADD COLUMN max_rental_seconds INT NULL`);
    await q.query(`ALTER TABLE agent_authorizations ADD COLUMN max_rental_seconds INT NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE agent_authorizations DROP COLUMN max_rental_seconds`);
    await q.query(`ALTER TABLE api_keys DROP COLUMN max_rental_seconds`);
    await q.query(
      `ALTER TABLE deployments DROP COLUMN phase, DROP COLUMN phase_since, DROP COLUMN endpoints, DROP COLUMN lease_seconds`,
    );
    await q.query(`ALTER TABLE orders
      DROP COLUMN machine_image, DROP COLUMN machine_env_names, DROP COLUMN machine_ports, DROP COLUMN machine_disk_gb,
      DROP COLUMN machine_secrets_enc, DROP COLUMN machine_secrets_kid, DROP COLUMN startup_script_sha256,
      DROP COLUMN terminate_after_seconds, DROP COLUMN wait_for_capacity_until`);
    await q.query(
      `ALTER TABLE offers DROP COLUMN cap_custom_image, DROP COLUMN cap_startup_script, DROP COLUMN cap_ports, DROP COLUMN cap_max_disk_gb`,
    );
  }
}
