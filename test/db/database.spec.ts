import { DataSource } from 'typeorm';
import { MIGRATIONS } from '../../migrations';
import { migrateUnderLock } from '../../src/database/migrator';
import { schemaDrift } from '../../src/database/schema-check';
import { createDataSource } from '../../src/database/data-source';
import { ENTITIES } from '../../src/entities';
import {
  DATABASE_KIND,
  ON_POSTGRES,
  freshPostgresDatabase,
  onTestDatabase,
  TestDatabase,
} from '../support/database';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe(`database (${DATABASE_KIND})`, () => {
  let db: TestDatabase;
  let ds: DataSource;

  onTestDatabase((opened) => {
    db = opened;
    ds = db.dataSource;
  });

  it('entities and migrations agree: the schema diff after all migrations is empty', async () => {
    expect(await schemaDrift(ds)).toEqual([]);
  });

  it('running the migrations again applies nothing', async () => {
    expect(await migrateUnderLock(ds)).toEqual([]);
  });

  it('concurrent transactions stay isolated: a rollback never undoes another transaction', async () => {
    const key = `iso-${Date.now()}`;
    const slowRollback = ds
      .transaction(async (m) => {
        await m.query('INSERT INTO settings (key, value) VALUES ($1, $2)', [`${key}-a`, 'a']);
        await sleep(150);
        throw new Error('roll back');
      })
      .catch((e: Error) => e.message);
    const committer = ds.transaction(async (m) => {
      await m.query('INSERT INTO settings (key, value) VALUES ($1, $2)', [`${key}-b`, 'b']);
    });
    expect(await slowRollback).toBe('roll back');
    await committer;
    const rows = await ds.query<
      {
        key: string;
      }[]
    >('SELECT key FROM settings WHERE key LIKE $1 ORDER BY key', [`${key}-%`]);
    expect(rows.map((r) => r.key)).toEqual([`${key}-b`]);
  });

  it('concurrent read-modify-write transactions lose no update', async () => {
    const key = `counter-${Date.now()}`;
    await ds.query('INSERT INTO settings (key, value) VALUES ($1, $2)', [key, '0']);
    const bump = () =>
      ds.transaction(async (m) => {
        const [row] = await m.query<
          {
            value: string;
          }[]
        >('SELECT value FROM settings WHERE key = $1 FOR UPDATE', [key]);
        await sleep(1);
        await m.query('UPDATE settings SET value = $2 WHERE key = $1', [
          key,
          String(Number(row.value) + 1),
        ]);
      });
    await Promise.all(Array.from({ length: 40 }, bump));
    const [row] = await ds.query<{ value: string }[]>('SELECT value FROM settings WHERE key = $1', [
      key,
    ]);
    expect(row.value).toBe('40');
  });

  (ON_POSTGRES ? it : it.skip)(
    'replicas starting together apply the migrations once (advisory lock)',
    async () => {
      const fresh = await freshPostgresDatabase();
      const sources = Array.from({ length: 4 }, () =>
        createDataSource({ url: fresh.url, poolSize: 2 }, ENTITIES),
      );
      try {
        await Promise.all(sources.map((s) => s.initialize()));
        const applied = await Promise.all(sources.map((s) => migrateUnderLock(s)));
        expect(applied.filter((a) => a.length > 0)).toHaveLength(1);
        // Every migration, once, in order.
        expect(applied.flat()).toEqual(MIGRATIONS.map((M) => new M().name));
        expect(await schemaDrift(sources[0])).toEqual([]);
      } finally {
        await Promise.all(sources.filter((s) => s.isInitialized).map((s) => s.destroy()));
        await fresh.drop();
      }
    },
  );
});
