/**
 * Which SQL may change what a cached read depends on (the embedded database's `DataChanges`):
 * plain functions over the statement text, no database in sight. Conservative throughout: what
 * is not recognized counts as a change.
 */

/**
 * The tables that readers keeping what they read depend on (each reader names its own through
 * `DataChanges.watch`). A statement "names" a table when the table's name appears in its text
 * as a whole word, in any case, quoted or not, anywhere (CTEs, subqueries, comments and string
 * literals included: a false match only costs a query).
 */
export class WatchedTables {
  private readonly names = new Set<string>();
  private pattern: RegExp | undefined;

  add(tables: readonly string[]): void {
    for (const table of tables) {
      if (!/^[a-z_][a-z0-9_]*$/.test(table)) throw new Error(`not a plain table name: ${table}`);
      this.names.add(table);
    }
    this.pattern = new RegExp(`\\b(?:${[...this.names].join('|')})\\b`, 'i');
  }

  /**
   * Whether `sql` may name a watched table. A Unicode-escaped identifier (`U&"…"`) could spell
   * one without its letters showing, so it counts as naming one.
   */
  namedIn(sql: string): boolean {
    if (this.pattern === undefined) return false;
    return this.pattern.test(sql) || /u&"/i.test(sql);
  }
}

/** `SELECT … INTO` creates a table. */
const INTO = /\binto\b/i;
/** `COMMIT PREPARED` / `ROLLBACK PREPARED` end a transaction that is no longer the session's. */
const PREPARED = /\bprepared\b/i;

/**
 * Whether running `sql` (a Parse message's statement, or a simple query's whole text) may change
 * a row of a watched table. It does not when it is:
 *
 * - read-only: `SHOW`, or a `SELECT` without `INTO` (the schema has no trigger, rule or
 *   function that writes: test/db/watched-tables.spec.ts keeps it so);
 * - transaction control: `BEGIN`, `START TRANSACTION`, `COMMIT`, `END`, `ROLLBACK`, `ABORT`,
 *   `SAVEPOINT`, `RELEASE`, `ROLLBACK TO` (see below why not counting them is safe), but not
 *   `PREPARE TRANSACTION` / `COMMIT PREPARED` / `ROLLBACK PREPARED`;
 * - a plain write (`INSERT`, `UPDATE`, `DELETE`, `MERGE`, or one starting with `WITH`) whose
 *   text names no watched table. No foreign key of a watched table to another table has an
 *   action (the same test), so such a write cannot cascade into one.
 *
 * Everything else counts: DDL, `TRUNCATE`, `COPY`, `DO`, `CALL`, `SET`, `EXECUTE`, and a text
 * with a second statement after a `;` (a simple query may carry several; they are not split).
 *
 * Why transaction control need not count: the count is taken when a batch is queued, before it
 * runs, and a reader that keeps a value reads outside a transaction on the one session. So its
 * query runs either before a transaction's `BEGIN` — its count was taken before the
 * transaction's writes were queued, and those writes moved the count — or after the
 * transaction's `COMMIT` / `ROLLBACK`, when what it reads is what that end left. Nothing becomes
 * visible to it at a `COMMIT` that was not counted when it was queued, and a `ROLLBACK` (or
 * `ROLLBACK TO` a savepoint) only undoes writes it never saw. A prepared transaction breaks
 * this: between `PREPARE TRANSACTION` and `COMMIT PREPARED` the session is outside any
 * transaction, so a read there would miss writes that were counted before it; those count.
 */
export function mayChangeWatched(sql: string, watched: WatchedTables): boolean {
  const start = leadingNoise(sql);
  if (start === undefined) return true;
  const text = sql.slice(start);
  if (secondStatement(text)) return true;
  const keyword = /^[a-z]+/i.exec(text)?.[0].toLowerCase();
  switch (keyword) {
    case 'show':
      return false;
    case 'select':
      return INTO.test(text) && watched.namedIn(text);
    case 'begin':
    case 'start':
    case 'commit':
    case 'end':
    case 'rollback':
    case 'abort':
    case 'savepoint':
    case 'release':
      return PREPARED.test(text);
    case 'insert':
    case 'update':
    case 'delete':
    case 'merge':
    case 'with':
      return watched.namedIn(text);
    default:
      return true;
  }
}

/** Whether a `;` is followed by anything but whitespace (or more `;`). */
function secondStatement(text: string): boolean {
  const semicolon = text.indexOf(';');
  return semicolon >= 0 && /[^\s;]/.test(text.slice(semicolon));
}

/**
 * Where the first keyword starts: after whitespace, `--` and block comments, `(`. Undefined for
 * a nested block comment (PostgreSQL nests them; where one ends is not worked out here).
 */
function leadingNoise(sql: string): number | undefined {
  let i = 0;
  for (;;) {
    const c = sql[i];
    if (c === ' ' || c === '\n' || c === '\t' || c === '\r' || c === '(') i++;
    else if (sql.startsWith('--', i)) {
      // PostgreSQL ends such a comment at either line break.
      const end = sql.slice(i).search(/[\n\r]/);
      if (end < 0) return sql.length;
      i += end + 1;
    } else if (sql.startsWith('/*', i)) {
      const end = sql.indexOf('*/', i + 2);
      if (end < 0) return sql.length;
      if (sql.lastIndexOf('/*', end) !== i) return undefined;
      i = end + 2;
    } else return i;
  }
}
