/**
 * Each table has one owner: exactly one repository writes it, only repositories (and the
 * database kernel) run SQL, and a repository reads another module's tables only where
 * JOINS_IN_OWN_WRITES says so (everything else goes through the owner's named read-only
 * queries). Read from the source itself — the SQL text in src/ and the tables the migrations
 * create — so a write or a read added anywhere else fails here.
 *
 * KNOWN_* list what is still to be moved (issue 11). They may only shrink: an entry that is no
 * longer true fails too, so the list is kept exact.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

const ROOT = path.resolve(__dirname, '../..');

/** Tables still written from more than one file, or from a file that is not a repository. */
const KNOWN_EXTRA_WRITERS: Record<string, string[]> = {};

/** Files that are not repositories and still run SQL themselves. */
const KNOWN_SQL_OUTSIDE_REPOSITORIES: string[] = [];

/**
 * Repositories whose statements read another module's tables, and which tables: only inside a
 * statement that writes a table the repository owns (one snapshot for what is read and what is
 * written; see each repository's class comment). Any other read of another module's table must be a
 * named read-only query of that table's repository. Kept exact, like the KNOWN_* lists.
 */
const JOINS_IN_OWN_WRITES: Record<string, string[]> = {
  // recordConsumerWrite, replaceDiscovered and insertDeclared: graph_edges take the producer's
  // version in the same statement.
  'src/graph/graph.repository.ts': ['states', 'units', 'versions'],
};

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

/** The module a file under src/ belongs to: `src/state/locks/x.ts` → `state`. */
const moduleOf = (file: string): string => file.split('/')[1];

/** The text of every string and template literal in a file (a template's parts in order). */
export function literals(file: string, text: string): string[] {
  const out: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isStringLiteralLike(node)) out.push(node.text);
    else if (ts.isTemplateExpression(node)) {
      out.push(
        [node.head.text, ...node.templateSpans.map((s) => ` \${} ${s.literal.text}`)].join(''),
      );
    }
    ts.forEachChild(node, visit);
  };
  visit(ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true));
  return out;
}

const READ = /\b(?:FROM|JOIN|USING)\s+"?([a-z_][a-z0-9_]*)"?/gi;

/**
 * Reads of another module's table, one entry per statement (string literal) and table:
 * `inWrite` says whether the statement also writes a table the file owns.
 */
export function crossModuleReads(
  files: { file: string; text: string }[],
  tables: Set<string>,
  writers: Map<string, Set<string>>,
): { file: string; table: string; inWrite: boolean }[] {
  const owner = new Map<string, string>();
  for (const [table, by] of writers) if (by.size === 1) owner.set(table, [...by][0]);
  const found: { file: string; table: string; inWrite: boolean }[] = [];
  for (const { file, text } of files) {
    for (const sql of literals(file, text)) {
      const writesOwn = [...tableWriters([{ file, text: sql }], tables).keys()].some(
        (t) => owner.get(t) === file,
      );
      const read = new Set<string>();
      for (const m of sql.matchAll(READ)) {
        const table = m[1].toLowerCase();
        const by = owner.get(table);
        if (by !== undefined && moduleOf(by) !== moduleOf(file)) read.add(table);
      }
      for (const table of read) found.push({ file, table, inWrite: writesOwn });
    }
  }
  return found;
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

  it("sees a read of another module's table, and whether it is inside an own write", () => {
    const sample = [
      { file: 'src/a/a.repository.ts', text: "m.query('INSERT INTO a_things (x) VALUES (1)')" },
      { file: 'src/a/x.repository.ts', text: "sqlRows(m, 'SELECT x FROM a_things')" },
      {
        file: 'src/b/b.repository.ts',
        text: [
          "m.query('DELETE FROM b_things')",
          '// FROM a_things, in a comment, is no read',
          "sqlRows(m, 'SELECT 1 FROM a_things WHERE x = $1')",
          'sqlRows(m, `SELECT b.y FROM b_things b JOIN "a_things" a ON a.x = b.y`)',
          'm.query(`UPDATE b_things SET y = t.x FROM (SELECT x FROM a_things) t WHERE ${w}`)',
        ].join('\n'),
      },
    ];
    const sampleTables = new Set(['a_things', 'b_things']);
    const reads = crossModuleReads(sample, sampleTables, tableWriters(sample, sampleTables));
    expect(reads).toEqual([
      { file: 'src/b/b.repository.ts', table: 'a_things', inWrite: false },
      { file: 'src/b/b.repository.ts', table: 'a_things', inWrite: false },
      { file: 'src/b/b.repository.ts', table: 'a_things', inWrite: true },
    ]);
  });

  it("a repository reads another module's tables only through that module's repository", () => {
    const problems: string[] = [];
    const joined = new Map<string, Set<string>>();
    for (const r of crossModuleReads(files, tables, writers)) {
      const allowed = JOINS_IN_OWN_WRITES[r.file]?.includes(r.table) ?? false;
      if (!r.inWrite || !allowed) {
        problems.push(
          `${r.file} reads ${r.table} (owned by another module)${r.inWrite ? ' in a write not in JOINS_IN_OWN_WRITES' : ''}: use a named read-only query of its repository`,
        );
      } else {
        if (!joined.has(r.file)) joined.set(r.file, new Set());
        joined.get(r.file)!.add(r.table);
      }
    }
    for (const [file, list] of Object.entries(JOINS_IN_OWN_WRITES)) {
      const seen = [...(joined.get(file) ?? [])].sort();
      if (JSON.stringify(seen) !== JSON.stringify([...list].sort())) {
        problems.push(
          `${file}: JOINS_IN_OWN_WRITES says ${list.join(', ')}, found ${seen.join(', ')}`,
        );
      }
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
