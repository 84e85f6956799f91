/**
 * Other releases, simulated by what they leave in the database: the release before this one
 * (this release's last migration undone, its record at the level that release recorded) and
 * a newer release (a migration this code does not know, and its compatibility record).
 */
import { DataSource } from 'typeorm';
import { MIGRATIONS, SCHEMA_LEVEL } from '../../migrations';
import { levelOf } from '../../src/database/schema-compat';

/** A schema level no release has yet. */
export const FUTURE = SCHEMA_LEVEL + 1000;
/** This release's last migration. */
export const LAST = new MIGRATIONS[MIGRATIONS.length - 1]();
/** The schema level of the release before this one. */
export const PREVIOUS_LEVEL = levelOf(MIGRATIONS[MIGRATIONS.length - 2].name);

/** The schema as the release before this one left it. */
export async function releaseBefore(ds: DataSource): Promise<void> {
  const runner = ds.createQueryRunner();
  await LAST.down(runner);
  await runner.release();
  await ds.query(`DELETE FROM schema_migrations WHERE name = $1`, [LAST.name]);
  const [{ present }] = await ds.query<{ present: boolean }[]>(
    `SELECT to_regclass('schema_compatibility') IS NOT NULL AS present`,
  );
  if (present) {
    await ds.query(`UPDATE schema_compatibility SET schema_level = $1`, [PREVIOUS_LEVEL]);
  }
}

/** What a newer release's migrations leave: its migration and its compatibility record. */
export const migratedByNewerRelease = (oldestCodeLevel: number) => async (ds: DataSource) => {
  await ds.query(`INSERT INTO schema_migrations ("timestamp", name) VALUES ($1, $2)`, [
    FUTURE,
    `Future${FUTURE}`,
  ]);
  await ds.query(
    `UPDATE schema_compatibility SET schema_level = $1, oldest_code_level = $2, migrated_by = '9.1.0'`,
    [FUTURE, oldestCodeLevel],
  );
};
