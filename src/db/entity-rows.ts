import type { DataSource, EntityMetadata, EntityTarget, ObjectLiteral } from 'typeorm';
import { dataSourceOf, type Sql } from './sql.js';

/**
 * Entity rows without the query builder, for the hot paths: the columns, names and value
 * conversions (transformers, JSON, booleans, dates) come from the entity's TypeORM metadata and
 * the driver's own converters, so an entity is still defined in one place and a row written or
 * read here is the row TypeORM would write or read.
 */

/** Inserts `value` (properties left undefined take the column default) in one statement. */
export async function insertEntity<E extends ObjectLiteral>(
  sql: Sql,
  target: EntityTarget<E>,
  value: Partial<E>,
): Promise<{ insertId: number; affectedRows: number }> {
  const ds = dataSourceOf(sql);
  const meta = ds.getMetadata(target);
  const texts = insertTexts(meta);
  const params: unknown[] = [];
  // Which columns the row sets, as a key: the statement text for that set is written once.
  let key = '';
  for (let i = 0; i < meta.columns.length; i++) {
    const c = meta.columns[i];
    const v = (value as ObjectLiteral)[c.propertyName];
    if (v === undefined) continue;
    key += `${i},`;
    params.push(ds.driver.preparePersistentValue(v, c));
  }
  let text = texts.get(key);
  if (text === undefined) {
    const names = meta.columns
      .filter((c) => (value as ObjectLiteral)[c.propertyName] !== undefined)
      .map((c) => `\`${c.databaseName}\``);
    text = `INSERT INTO \`${meta.tableName}\` (${names.join(', ')}) VALUES (${names.map(() => '?').join(', ')})`;
    texts.set(key, text);
  }
  return sql.query(text, params);
}

const insertTextsByEntity = new WeakMap<EntityMetadata, Map<string, string>>();

function insertTexts(meta: EntityMetadata): Map<string, string> {
  let texts = insertTextsByEntity.get(meta);
  if (!texts) insertTextsByEntity.set(meta, (texts = new Map()));
  return texts;
}

/** The entity a raw `SELECT *` row (database column names) stands for, as TypeORM would load it. */
export function hydrate<E extends ObjectLiteral>(
  sql: Sql | DataSource,
  target: EntityTarget<E>,
  row: Record<string, unknown>,
): E {
  const ds = dataSourceOf(sql);
  const meta = ds.getMetadata(target);
  const entity = meta.create() as E;
  for (const c of meta.columns) {
    if (c.databaseName in row)
      (entity as ObjectLiteral)[c.propertyName] = ds.driver.prepareHydratedValue(row[c.databaseName], c);
  }
  return entity;
}
