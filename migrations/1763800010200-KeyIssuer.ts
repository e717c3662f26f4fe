import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The characters key names may not hold as this migration found the rule (key-name.ts keeps the
 * rule for new names). Kept here, not imported: a migration does what it did when it was written,
 * whatever the rule becomes later.
 */
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]|(?![\uFE00-\uFE0F])\p{Default_Ignorable_Code_Point}/gu;
const withoutInvisible = (text: string): string => text.replace(INVISIBLE, '');

/**
 * Which OWNER key issued a key (`api_keys.issued_by_key_id`), so revoking an owner key revokes
 * what it let in: backfilled for keys exchanged for authorization sessions, whose approving key
 * was recorded; keys owners issued directly before this column have no recorded issuer. Indexes
 * for the revocation's two lookups. Stored key and agent names lose the control, bidirectional
 * and invisible characters names may no longer hold, so no page or chat shows one.
 */
export class KeyIssuer1763800010200 implements MigrationInterface {
  name = 'KeyIssuer1763800010200';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `ALTER TABLE api_keys ADD COLUMN issued_by_key_id CHAR(36) NULL AFTER origin, ADD KEY ix_api_keys_issuer (issued_by_key_id)`,
    );
    await q.query(`ALTER TABLE agent_authorizations ADD KEY ix_agent_auth_approver (approved_by_key_id, status)`);
    await q.query(`UPDATE api_keys k JOIN agent_authorizations a ON a.issued_key_id = k.id
                      SET k.issued_by_key_id = a.approved_by_key_id
                    WHERE a.approved_by_key_id IS NOT NULL`);

    const keys: { id: string; name: string }[] = await q.query(`SELECT id, name FROM api_keys`);
    for (const k of keys) {
      const clean = withoutInvisible(k.name).trim();
      if (clean !== k.name) await q.query(`UPDATE api_keys SET name = ? WHERE id = ?`, [clean || 'unnamed key', k.id]);
    }
    const sessions: { id: string; name: string | null; requested_name: string | null }[] = await q.query(
      `SELECT id, name, requested_name FROM agent_authorizations WHERE name IS NOT NULL OR requested_name IS NOT NULL`,
    );
    const cleaned = (v: string | null) => (v === null ? null : withoutInvisible(v).trim() || null);
    for (const s of sessions) {
      const [name, requested] = [cleaned(s.name), cleaned(s.requested_name)];
      if (name !== s.name || requested !== s.requested_name) {
        await q.query(`UPDATE agent_authorizations SET name = ?, requested_name = ? WHERE id = ?`, [
          name,
          requested,
          s.id,
        ]);
      }
    }
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE agent_authorizations DROP KEY ix_agent_auth_approver`);
    await q.query(`ALTER TABLE api_keys DROP KEY ix_api_keys_issuer, DROP COLUMN issued_by_key_id`);
  }
}
