import type { CompatibilityRecord, DatabaseSchema } from './schema-compat';

/** A query runner, or a data source (a probe outside any transaction). */
type Queryable = { query: (sql: string, parameters?: unknown[]) => Promise<unknown> };

/**
 * The applied migrations (TypeORM's `schema_migrations`) and the compatibility record. Either
 * table may not exist yet: an empty database, or one migrated by a release before the record.
 */
export async function readDatabaseSchema(q: Queryable): Promise<DatabaseSchema> {
  const [tables] = (await q.query(
    `SELECT to_regclass('schema_migrations') IS NOT NULL AS migrations,
            to_regclass('schema_compatibility') IS NOT NULL AS record`,
  )) as { migrations: boolean; record: boolean }[];
  const applied = tables.migrations
    ? ((await q.query(`SELECT name FROM schema_migrations ORDER BY id`)) as { name: string }[])
    : [];
  const rows = tables.record
    ? ((await q.query(
        `SELECT schema_level, oldest_code_level, migrated_by, migrated_at
           FROM schema_compatibility WHERE id = 1`,
      )) as {
        schema_level: string;
        oldest_code_level: string;
        migrated_by: string;
        migrated_at: Date;
      }[])
    : [];
  const row = rows[0];
  return {
    applied: applied.map((r) => r.name),
    record: row && {
      schemaLevel: Number(row.schema_level),
      oldestCodeLevel: Number(row.oldest_code_level),
      migratedBy: row.migrated_by,
      migratedAt: row.migrated_at,
    },
  };
}

/** Writes the record (in the migrations' transaction, under the migration lock). */
export async function writeCompatibilityRecord(
  q: Queryable,
  record: Omit<CompatibilityRecord, 'migratedAt'>,
): Promise<void> {
  await q.query(
    `INSERT INTO schema_compatibility (id, schema_level, oldest_code_level, migrated_by, migrated_at)
     VALUES (1, $1, $2, $3, now())
     ON CONFLICT (id) DO UPDATE
        SET schema_level = EXCLUDED.schema_level, oldest_code_level = EXCLUDED.oldest_code_level,
            migrated_by = EXCLUDED.migrated_by, migrated_at = EXCLUDED.migrated_at`,
    [record.schemaLevel, record.oldestCodeLevel, record.migratedBy],
  );
}
