import type { DataSource, EntityTarget, ObjectLiteral } from 'typeorm';
import { dataSourceOf, type Sql } from './sql.js';

/**
 * Entity rows without the query builder, for the hot paths: the columns, names and value
 * conversions (transformers, JSON, booleans, dates) come from the entity's TypeORM metadata and
 * the driver's own converters, so an entity is still defined in one place and a row written or
 * read here is the row TypeORM would write or read.
 */

/** Inserts `value` (properties left undefined take the column default) in one statement. */
export async function insertEntity<E extends ObjectLiteral>(sql: Sql, target: EntityTarget<E>, value: Partial<E>): Promise<{ insertId: number; affectedRows: number }> {
  const ds = dataSourceOf(sql);
  const meta = ds.getMetadata(target);
  const names: string[] = [];
  const params: unknown[] = [];
  for (const c of meta.columns) {
    const v = (value as ObjectLiteral)[c.propertyName];
    if (v === undefined) continue;
    names.push(`\`${c.databaseName}\``);
    params.push(ds.driver.preparePersistentValue(v, c));
  }
  return sql.query(`INSERT INTO \`${meta.tableName}\` (${names.join(', ')}) VALUES (${names.map(() => '?').join(', ')})`, params);
}

/** The entity a raw `SELECT *` row (database column names) stands for, as TypeORM would load it. */
export function hydrate<E extends ObjectLiteral>(sql: Sql | DataSource, target: EntityTarget<E>, row: Record<string, unknown>): E {
  const ds = dataSourceOf(sql);
  const meta = ds.getMetadata(target);
  const entity = meta.create() as E;
  for (const c of meta.columns) {
    if (c.databaseName in row) (entity as ObjectLiteral)[c.propertyName] = ds.driver.prepareHydratedValue(row[c.databaseName], c);
  }
  return entity;
}
