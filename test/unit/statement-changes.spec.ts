import { mayChangeWatched, WatchedTables } from '../../src/database/statement-changes';
import { CURRENT_READ_TABLES } from '../../src/state/state.repository';

// What moves the embedded database's change count, on which the kept current-version reads
// rely: every statement that may change a watched table must (a false "no" serves a stale
// state), and the writes of the GET path to other tables must not (or the cache never hits).
describe('mayChangeWatched', () => {
  const watched = new WatchedTables();
  watched.add(CURRENT_READ_TABLES);

  const changes: [string, string][] = [
    ['an insert into a watched table', 'INSERT INTO versions (state_id) VALUES ($1) RETURNING *'],
    ['an update of one, upper case', 'UPDATE STATES SET deleted_at = now() WHERE id = $1'],
    ['a delete of one, mixed case', 'Delete From Units WHERE id = $1'],
    ['a quoted name', 'UPDATE "states" SET next_version = 2'],
    ['a schema-qualified quoted name', 'DELETE FROM "public"."versions" WHERE id = $1'],
    [
      'a lock acquire that touches states only in a CTE',
      `WITH s AS (SELECT id FROM states WHERE unit_id = $1 FOR UPDATE)
       INSERT INTO locks (state_id, holder) SELECT id, $2 FROM s ON CONFLICT DO NOTHING RETURNING *`,
    ],
    [
      'a CTE that deletes from a watched table under a SELECT',
      'WITH gone AS (DELETE FROM units RETURNING id) SELECT count(*) FROM gone',
    ],
    [
      'a watched table named only in a subquery',
      'DELETE FROM locks WHERE state_id IN (SELECT id FROM states)',
    ],
    ['a write after a leading comment', '-- purge\n/* a unit */ DELETE FROM units WHERE id = $1'],
    [
      'a comment ended by a carriage return',
      '--x\rDELETE FROM states WHERE id = 1 OR\n(SELECT true)',
    ],
    ['a nested block comment', '/* a /* b */ SELECT 1 */ DELETE FROM states'],
    ['a Unicode-escaped identifier', 'DELETE FROM U&"st\\0061tes"'],
    ['SELECT INTO naming a watched table', 'SELECT * INTO TEMP states FROM locks'],
    ['a second statement in a simple query', 'SELECT 1; DELETE FROM audit_events'],
    ['transaction control followed by a write', 'BEGIN; UPDATE locks SET holder = 1'],
    ['COMMIT PREPARED', "COMMIT PREPARED 'tx1'"],
    ['ROLLBACK PREPARED', "ROLLBACK PREPARED 'tx1'"],
    ['PREPARE TRANSACTION', "PREPARE TRANSACTION 'tx1'"],
    ['TRUNCATE, even of another table (CASCADE)', 'TRUNCATE audit_events CASCADE'],
    ['DDL', 'ALTER TABLE audit_events ADD COLUMN x int'],
    ['a DO block', "DO $$ BEGIN EXECUTE 'DELETE FROM ' || 'sta' || 'tes'; END $$"],
    ['CALL', 'CALL something()'],
    ['SET', 'SET search_path = elsewhere'],
    ['EXECUTE of a prepared statement', 'EXECUTE p1(1)'],
    ['COPY', 'COPY audit_events FROM STDIN'],
    ['EXPLAIN ANALYZE of a write', 'EXPLAIN ANALYZE DELETE FROM states'],
    ['an empty text', ''],
    ['an unterminated comment', '/* DELETE FROM states'],
  ];
  const keeps: [string, string][] = [
    [
      'the current-version read itself',
      `SELECT u.id FROM units u LEFT JOIN states s ON s.unit_id = u.id
         LEFT JOIN versions v ON v.id = s.current_version_id WHERE u.name = $1`,
    ],
    ['a SELECT FOR UPDATE of a watched table', 'SELECT * FROM states WHERE id = $1 FOR UPDATE'],
    ['a parenthesized SELECT after comments', '  -- a comment\n/* another */ (SELECT 1)'],
    ['SHOW', 'SHOW server_version'],
    [
      'the batched audit insert',
      'INSERT INTO audit_events (at, type, actor, action, unit, workspace, outcome) VALUES ($1, $2, $3, $4, $5, $6, $7)',
    ],
    [
      'a replay-guard row',
      'INSERT INTO s3_used_signatures (signature_sha256, expires_at) VALUES ($1, $2) ON CONFLICT DO NOTHING',
    ],
    [
      "a token's last use",
      "UPDATE api_tokens SET last_used_at = now() WHERE id = $1 AND last_used_at < now() - interval '60 seconds'",
    ],
    ['a lock row alone', 'DELETE FROM locks WHERE state_id = $1 AND id = $2'],
    ['a name that only contains a watched one', 'UPDATE unit_states_versions SET x = 1'],
    ['a watched name as a column prefix', 'INSERT INTO graph_edges (states_id) VALUES (1)'],
    ['SELECT INTO another table', 'SELECT 1 AS x INTO TEMP copied'],
    ['a write with a trailing semicolon', 'DELETE FROM locks WHERE id = 1;  \n'],
    ['BEGIN', 'BEGIN'],
    ['START TRANSACTION with a level', 'START TRANSACTION ISOLATION LEVEL READ COMMITTED'],
    ['COMMIT', 'COMMIT'],
    ['END', 'end'],
    ['ROLLBACK', 'ROLLBACK'],
    ['ABORT', 'ABORT'],
    ['SAVEPOINT', 'SAVEPOINT s1'],
    ['ROLLBACK TO SAVEPOINT', 'ROLLBACK TO SAVEPOINT s1'],
    ['RELEASE SAVEPOINT', 'RELEASE SAVEPOINT s1'],
    [
      'a MERGE into another table',
      'MERGE INTO locks l USING (SELECT 1 AS id) x ON l.id = x.id WHEN MATCHED THEN DELETE',
    ],
  ];

  it.each(changes)('counts %s', (_, sql) => {
    expect(mayChangeWatched(sql, watched)).toBe(true);
  });

  it.each(keeps)('does not count %s', (_, sql) => {
    expect(mayChangeWatched(sql, watched)).toBe(false);
  });

  it('with no table watched, counts only what it cannot judge', () => {
    const none = new WatchedTables();
    expect(mayChangeWatched('DELETE FROM states', none)).toBe(false);
    expect(mayChangeWatched('TRUNCATE states', none)).toBe(true);
  });

  it('refuses a table name it could not match safely', () => {
    expect(() => new WatchedTables().add(['States'])).toThrow(/not a plain table name/);
    expect(() => new WatchedTables().add(['a|b'])).toThrow(/not a plain table name/);
  });
});
