import type { Store } from '../../db/store.js';
import type { SecretBox } from './secret-box.js';
import { SEALED_SECRET_KINDS, type SealedColumnRepositories } from './sealed-secrets.js';

/** What re-sealing did to one kind of secret. */
export interface ResealOutcome {
  kind: string;
  /** Secrets now sealed under the current key that were under another. */
  resealed: number;
  /** Secrets that changed between read and write (sealed afresh meanwhile): left as they are. */
  skipped: number;
  /** After the run: stored secrets of this kind per key id. */
  byKey: Record<string, number>;
}

const BATCH = 200;

/**
 * Seals every stored secret again under `box`'s current key (SECRETS_KEY), opening each with the
 * key that sealed it (SECRETS_KEY_PREVIOUS). Each row is written on its own, guarded on what was
 * read, so a running service may keep sealing and opening meanwhile, and a second run (or one
 * after an interruption) carries on where the first stopped. Throws, naming the key, when a
 * secret was sealed under a key `box` does not hold: nothing that run had not reached is touched.
 */
export async function resealSecrets(store: Store<SealedColumnRepositories>, box: SecretBox): Promise<ResealOutcome[]> {
  const out: ResealOutcome[] = [];
  for (const kind of SEALED_SECRET_KINDS) {
    let resealed = 0;
    let skipped = 0;
    let after = '';
    for (;;) {
      const rows = await store.read((r) => kind.column(r).underOtherKeys(box.currentKeyId, after, BATCH));
      for (const row of rows) {
        let plaintext: string;
        try {
          plaintext = box.open(row.sealed, row.keyId, kind.binding(row.id));
        } catch (err) {
          throw new Error(
            `cannot open ${kind.name} row ${row.id} sealed under key "${row.keyId}": ${(err as Error).message}; list that key in SECRETS_KEY_PREVIOUS`,
          );
        }
        const next = box.seal(plaintext, kind.binding(row.id));
        const written = { sealed: next.ciphertext, keyId: next.keyId };
        if (await store.read((r) => kind.column(r).replace(row, written))) resealed += 1;
        else skipped += 1;
      }
      if (rows.length < BATCH) break;
      after = rows.at(-1)!.id;
    }
    out.push({
      kind: kind.name,
      resealed,
      skipped,
      byKey: await store.read((r) => kind.column(r).countsByKey()),
    });
  }
  return out;
}
