import { CURRENT_READ_TABLES } from '../../src/state/state.repository';
import { DATABASE_KIND, openTestDatabase, TestDatabase } from '../support/database';

// The embedded database's change count (`mayChangeWatched`) lets through a write that names no
// watched table, and any SELECT without INTO. That is safe only while nothing in the schema
// changes a watched table behind a statement's back: no trigger, rule or function of ours, no
// view or inheritance to reach one under another name, and no foreign key by which a write to
// another table cascades into one.
describe(`what the change count relies on in the schema (${DATABASE_KIND})`, () => {
  let db: TestDatabase;
  const watched: readonly string[] = CURRENT_READ_TABLES;

  beforeAll(async () => {
    db = await openTestDatabase();
  });
  afterAll(async () => {
    await db.close();
  });

  const rows = (sql: string, params: unknown[] = []) =>
    db.dataSource.query<Record<string, unknown>[]>(sql, params);

  it('has no trigger, rule, view or function of its own', async () => {
    expect(await rows(`SELECT tgname FROM pg_trigger WHERE NOT tgisinternal`)).toEqual([]);
    expect(await rows(`SELECT rulename FROM pg_rules WHERE schemaname = current_schema()`)).toEqual(
      [],
    );
    expect(
      await rows(
        `SELECT c.relname FROM pg_class c
          WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('v', 'm', 'f')`,
      ),
    ).toEqual([]);
    // An extension's functions (pgcrypto's, on PostgreSQL) write no table.
    expect(
      await rows(
        `SELECT proname FROM pg_proc p
          WHERE pronamespace = current_schema()::regnamespace
            AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')`,
      ),
    ).toEqual([]);
  });

  it('has every watched table, none inherited or partitioned', async () => {
    const found = await rows(
      `SELECT c.relname, c.relkind, c.relispartition FROM pg_class c
        WHERE c.relnamespace = current_schema()::regnamespace AND c.relname = ANY($1)
        ORDER BY c.relname`,
      [watched],
    );
    expect(found).toEqual(
      [...watched].sort().map((relname) => ({ relname, relkind: 'r', relispartition: false })),
    );
    expect(
      await rows(
        `SELECT inhrelid::regclass::text AS child, inhparent::regclass::text AS parent
           FROM pg_inherits`,
      ),
    ).toEqual([]);
  });

  it('lets no write to another table cascade into a watched one', async () => {
    const cascading = await rows(
      `SELECT conname FROM pg_constraint
        WHERE contype = 'f'
          AND conrelid::regclass::text = ANY($1)
          AND NOT (confrelid::regclass::text = ANY($1))
          AND (confdeltype NOT IN ('a', 'r') OR confupdtype NOT IN ('a', 'r'))`,
      [watched],
    );
    expect(cascading).toEqual([]);
    // The query sees the cascades there are (between watched tables).
    const within = await rows(
      `SELECT conname FROM pg_constraint
        WHERE contype = 'f' AND conrelid::regclass::text = ANY($1) AND confdeltype = 'c'`,
      [watched],
    );
    expect(within.length).toBeGreaterThan(0);
  });
});
