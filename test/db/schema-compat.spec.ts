import { DataSource } from 'typeorm';
import { SCHEMA_LEVEL } from '../../migrations';
import { packageVersion } from '../../src/common/version';
import { StartupError } from '../../src/common/startup';
import { prepareSchema } from '../../src/database/migrator';
import { readDatabaseSchema } from '../../src/database/schema-compatibility.repository';
import { DATABASE_KIND, onTestDatabase, TestDatabase } from '../support/database';
import {
  FUTURE,
  LAST,
  migratedByNewerRelease,
  PREVIOUS_LEVEL,
  releaseBefore,
} from '../support/releases';

const VERSION = packageVersion();
const migratedByNewer = (ds: DataSource, oldestCodeLevel: number) =>
  migratedByNewerRelease(oldestCodeLevel)(ds);

describe(`schema compatibility (${DATABASE_KIND})`, () => {
  let db: TestDatabase;
  let ds: DataSource;

  onTestDatabase((opened) => {
    db = opened;
    ds = db.dataSource;
  });
  afterEach(async () => {
    // Back to what this code's migrations leave.
    await ds.query(`DELETE FROM schema_migrations WHERE name = $1`, [`Future${FUTURE}`]);
    await prepareSchema(ds, { migrate: true }).catch(() => undefined);
    await ds.query(
      `UPDATE schema_compatibility SET schema_level = $1, oldest_code_level = 1764640000000, migrated_by = $2`,
      [SCHEMA_LEVEL, VERSION],
    );
  });

  it("after migrating, the database records this code's schema level, the highest contract floor and the release", async () => {
    expect((await readDatabaseSchema(ds)).record).toMatchObject({
      schemaLevel: SCHEMA_LEVEL,
      // CredentialLineage1764640000000 dropped columns that older code reads.
      oldestCodeLevel: 1764640000000,
      migratedBy: VERSION,
    });
  });

  it.each([true, false])(
    'a newer schema that still accepts this code (a rollback, migrate %s): it runs, and the record stays as the newer release wrote it',
    async (migrate) => {
      await migratedByNewer(ds, SCHEMA_LEVEL);
      const { applied, verdict } = await prepareSchema(ds, { migrate });
      expect(applied).toEqual([]);
      expect(verdict).toEqual({
        kind: 'newer',
        schemaLevel: FUTURE,
        oldestCodeLevel: SCHEMA_LEVEL,
        migratedBy: '9.1.0',
      });
      expect((await readDatabaseSchema(ds)).record).toMatchObject({
        schemaLevel: FUTURE,
        oldestCodeLevel: SCHEMA_LEVEL,
        migratedBy: '9.1.0',
      });
    },
  );

  it.each([true, false])(
    'a schema whose floor is above this code (migrate %s): refused in one line naming both versions and what to do, changing nothing',
    async (migrate) => {
      await migratedByNewer(ds, FUTURE);
      const before = await readDatabaseSchema(ds);
      const refused = await prepareSchema(ds, { migrate }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(StartupError);
      expect((refused as Error).message).toBe(
        `this Statehouse (${VERSION}, schema level ${SCHEMA_LEVEL}) is too old for the database: ` +
          `its schema (level ${FUTURE}, migrated by Statehouse 9.1.0) runs only with code of schema level ${FUTURE} or later. ` +
          `Run Statehouse 9.1.0 (or another release of schema level ${FUTURE} or later); ` +
          'going back further needs the database backup taken before that migration',
      );
      expect(await readDatabaseSchema(ds)).toEqual(before);
    },
  );

  it('code newer than the schema, not allowed to migrate: behind, nothing applied; allowed: migrated and recorded', async () => {
    // The schema as the release before this one left it.
    await releaseBefore(ds);

    const waiting = await prepareSchema(ds, { migrate: false });
    expect(waiting).toEqual({
      applied: [],
      verdict: { kind: 'behind', schemaLevel: PREVIOUS_LEVEL, pending: [LAST.name] },
    });
    expect((await readDatabaseSchema(ds)).applied).not.toContain(LAST.name);

    const migrated = await prepareSchema(ds, { migrate: true });
    expect(migrated).toEqual({ applied: [LAST.name], verdict: { kind: 'current' } });
    expect((await readDatabaseSchema(ds)).record).toMatchObject({
      schemaLevel: SCHEMA_LEVEL,
      oldestCodeLevel: 1764640000000,
      migratedBy: VERSION,
    });
  });
});
