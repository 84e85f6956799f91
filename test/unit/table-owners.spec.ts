/**
 * Each table has one owner: exactly one repository writes it, and only repositories (and the
 * database kernel) run SQL. Read from the source itself — the SQL text in src/ and the tables the
 * migrations create — so a write added anywhere else fails here.
 *
 * KNOWN_* list what is still to be moved (issue 11). They may only shrink: an entry that is no
 * longer true fails too, so the list is kept exact.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '../..');

/** Tables still written from more than one file, or from a file that is not a repository. */
const KNOWN_EXTRA_WRITERS: Record<string, string[]> = {};

/** Files that are not repositories and still run SQL themselves. */
const KNOWN_SQL_OUTSIDE_REPOSITORIES: string[] = [];

/**
 * Code that may run SQL without being a table's repository: the database kernel (transactions,
 * advisory locks, migrations, `ANALYZE`), the readiness probe's `SELECT 1`, and the LISTEN
 * connection of the RBAC cache.
 */
const INFRASTRUCTURE = new Set([
  'src/database/database.module.ts',
  'src/database/migrator.ts',
  'src/database/sql.ts',
  'src/database/transaction.ts',
  'src/health/health.controller.ts',
  'src/rbac/rbac-cache.ts',
]);

function sourceFiles(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = path.posix.join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(rel);
    return e.name.endsWith('.ts') ? [rel] : [];
  });
}

function tablesCreatedByMigrations(): Set<string> {
  const tables = new Set<string>();
  for (const file of sourceFiles('migrations')) {
    const text = readFileSync(path.join(ROOT, file), 'utf8');
    for (const m of text.matchAll(/CREATE TABLE\s+(?:IF NOT EXISTS\s+)?"?([a-z_][a-z0-9_]*)"?/gi)) {
      tables.add(m[1]);
    }
  }
  return tables;
}

const isRepository = (file: string): boolean =>
  file.endsWith('.repository.ts') || file.endsWith('.store.ts');

/** table -> the files whose SQL writes it (INSERT INTO, UPDATE, DELETE FROM, TRUNCATE). */
export function tableWriters(
  files: { file: string; text: string }[],
  tables: Set<string>,
): Map<string, Set<string>> {
  const writers = new Map<string, Set<string>>();
  const write =
    /\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM|TRUNCATE(?:\s+TABLE)?)\s+"?([a-z_][a-z0-9_]*)"?/gi;
  for (const { file, text } of files) {
    for (const m of text.matchAll(write)) {
      const table = m[1].toLowerCase();
      if (!tables.has(table)) continue;
      if (!writers.has(table)) writers.set(table, new Set());
      writers.get(table)!.add(file);
    }
  }
  return writers;
}

const runsSql = (text: string): boolean => /\.query\(\s*[`'"]|\bsqlRows\s*[<(]/.test(text);

describe('table ownership', () => {
  const tables = tablesCreatedByMigrations();
  const files = sourceFiles('src').map((file) => ({
    file,
    text: readFileSync(path.join(ROOT, file), 'utf8'),
  }));
  const writers = tableWriters(files, tables);

  it('finds the tables and their writers (the scan itself works)', () => {
    expect(tables.size).toBeGreaterThanOrEqual(15);
    expect([...tables]).toEqual(expect.arrayContaining(['units', 'states', 'versions', 'locks']));
    expect(writers.get('units')).toEqual(new Set(['src/state/state.repository.ts']));
  });

  it('sees a write from a second file as a second writer', () => {
    const extra = tableWriters(
      [
        { file: 'src/a/a.repository.ts', text: "m.query('INSERT INTO units (name) VALUES ($1)')" },
        { file: 'src/b/b.service.ts', text: 'await m.query(`UPDATE "units" SET x = 1`)' },
      ],
      new Set(['units']),
    );
    expect(extra.get('units')).toEqual(new Set(['src/a/a.repository.ts', 'src/b/b.service.ts']));
  });

  it('every table is written by exactly one repository', () => {
    const problems: string[] = [];
    for (const [table, by] of writers) {
      const list = [...by].sort();
      const known = KNOWN_EXTRA_WRITERS[table];
      if (known !== undefined) {
        if (JSON.stringify(known) !== JSON.stringify(list)) {
          problems.push(
            `${table}: written by ${list.join(', ')} — KNOWN_EXTRA_WRITERS says ${known.join(', ')}`,
          );
        }
        continue;
      }
      if (list.length !== 1 || !isRepository(list[0])) {
        problems.push(`${table}: written by ${list.join(', ')} (one repository must own it)`);
      }
    }
    for (const table of Object.keys(KNOWN_EXTRA_WRITERS)) {
      if (!writers.has(table))
        problems.push(`${table}: in KNOWN_EXTRA_WRITERS but not written at all`);
    }
    expect(problems).toEqual([]);
  });

  it('only repositories and the database kernel run SQL', () => {
    const outside = files
      .filter(({ file, text }) => runsSql(text) && !isRepository(file) && !INFRASTRUCTURE.has(file))
      .map(({ file }) => file)
      .sort();
    expect(outside).toEqual([...KNOWN_SQL_OUTSIDE_REPOSITORIES].sort());
  });
});
