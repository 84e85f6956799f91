import { noteDefaultIsolation } from '../../src/database/transaction';
import { MemoryBlobStore } from '../../src/storage/memory-blob.store';
import { openTestDatabase, TestDatabase } from '../support/database';
import { statementsOf } from '../support/statements';
import { ADMIN, body, buildServices, Services, tfState } from '../support/services';

/**
 * What a write of a new version to a state written before sends to the database, pinned: on
 * the embedded database every statement is serialized on its one connection. The unit and the
 * state row are locked in one statement, the lock and the current version are read in one, and
 * the version is inserted, made current and audited in one.
 */
describe('the statements of a state write', () => {
  let db: TestDatabase;
  let s: Services;
  beforeAll(async () => {
    db = await openTestDatabase();
    await noteDefaultIsolation(db.dataSource);
    s = buildServices(db.dataSource, new MemoryBlobStore());
  });
  afterAll(async () => {
    await db.close();
  });

  const write = (unit: string, serial: number) =>
    s.writer.write({
      unit,
      workspace: 'default',
      principal: ADMIN,
      door: 'api',
      body: body(tfState(serial, 'lineage-statements', { n: serial })),
    });
  const oneLine = (sql: string) => sql.replace(/\s+/g, ' ').trim();

  it('a write to an existing state: the unit and state row in one statement, its lock and current version in one, the version inserted, made current and audited in one', async () => {
    await write('team/statements', 1);
    const sent = (await statementsOf(() => write('team/statements', 2))).map(oneLine);
    expect(sent.map((q) => q.split(' ').slice(0, 2).join(' '))).toEqual([
      'SELECT *', // the unit, by name, before the body is read (authorization)
      'START TRANSACTION',
      'SELECT s.*', // the unit FOR SHARE and the state row FOR NO KEY UPDATE
      'SELECT l.lock_id,', // the lock held on it and the current version, once the row is ours
      'WITH v', // INSERT the version, UPDATE the state's current version, INSERT the audit row
      'COMMIT',
    ]);
    expect(sent[2]).toMatch(/FOR KEY SHARE OF u FOR NO KEY UPDATE OF s$/);
    expect(sent[3]).toMatch(/JOIN locks l .*JOIN versions v/);
    expect(sent[4]).toMatch(
      /INSERT INTO versions .*UPDATE states SET current_version_id.*INSERT INTO audit_events/,
    );
    const page = await s.reader.listVersions(
      ADMIN,
      { unit: 'team/statements', workspace: 'default' },
      10,
      undefined,
    );
    expect(page.items.map((v) => v.version)).toEqual([2, 1]);
  });

  it('the first write of a new unit still creates the unit, its default workspace and the state', async () => {
    const r = await write('team/statements-new', 1);
    expect(r.created).toBe(true);
    expect(r.version.version).toBe(1);
    const again = await write('team/statements-new', 2);
    expect(again.version.version).toBe(2);
  });
});
