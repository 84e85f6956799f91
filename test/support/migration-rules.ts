import ts from 'typescript';

/**
 * The static rules every migration keeps (expand, then contract in a later release), read from
 * its source: what its `up` (and the helpers of its class, everything but `down`) runs, and
 * the `contractFloor` it declares.
 */

/** Statements that take away or change what older code uses. */
const CONTRACT_SQL: { pattern: RegExp; what: string }[] = [
  { pattern: /\bDROP\s+(TABLE|COLUMN)\b/i, what: 'drops a table or column' },
  { pattern: /\bRENAME\b/i, what: 'renames a table or column' },
  { pattern: /\bALTER\s+COLUMN\s+"?\w+"?\s+(SET\s+DATA\s+)?TYPE\b/i, what: 'retypes a column' },
  { pattern: /\bSET\s+NOT\s+NULL\b/i, what: 'makes a column NOT NULL' },
  {
    // Older code inserts rows without the new column: it needs a default.
    pattern:
      /\bADD\s+(COLUMN\s+)?"?\w+"?\s+(?:(?!\bDEFAULT\b)[^,;])*\bNOT\s+NULL\b(?![^,;]*\bDEFAULT\b)/i,
    what: 'adds a NOT NULL column without a default',
  },
];

export interface MigrationSource {
  file: string;
  className: string | undefined;
  /** The `name` property's value. */
  name: string | undefined;
  contractFloor: number | undefined;
  /** What makes it a contract step (empty for an expand step). */
  contracts: string[];
}

export function readMigrationSource(file: string, text: string): MigrationSource {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const cls = sf.statements.find(ts.isClassDeclaration);
  let name: string | undefined;
  let contractFloor: number | undefined;
  const sql: string[] = [];
  for (const member of cls?.members ?? []) {
    const key = member.name && ts.isIdentifier(member.name) ? member.name.text : undefined;
    if (ts.isPropertyDeclaration(member) && member.initializer) {
      if (key === 'name' && ts.isStringLiteral(member.initializer)) name = member.initializer.text;
      if (key === 'contractFloor' && ts.isNumericLiteral(member.initializer)) {
        contractFloor = Number(member.initializer.text.replace(/_/g, ''));
      }
    }
    if (key === 'down') continue;
    const collect = (node: ts.Node): void => {
      if (ts.isStringLiteralLike(node) || ts.isTemplateHead(node)) sql.push(node.text);
      else if (ts.isTemplateMiddle(node) || ts.isTemplateTail(node)) sql.push(node.text);
      ts.forEachChild(node, collect);
    };
    collect(member);
  }
  const contracts = CONTRACT_SQL.filter((c) => sql.some((s) => c.pattern.test(s))).map(
    (c) => c.what,
  );
  return { file, className: cls?.name?.text, name, contractFloor, contracts };
}

/** Every broken rule, as sentences naming the file; `registered` is MIGRATIONS' order. */
export function migrationRuleProblems(
  sources: MigrationSource[],
  registered: string[],
  schemaLevel: number,
): string[] {
  const problems: string[] = [];
  const byName = new Map(sources.map((s) => [s.name, s]));
  const levels = new Set<number>();
  let previous = 0;
  let floor = 0;
  for (const s of sources) {
    const stamp = /^(\d{13})-[a-z0-9-]+\.ts$/.exec(s.file)?.[1];
    if (!stamp) {
      problems.push(`${s.file}: name it <13-digit timestamp>-<kebab-name>.ts`);
      continue;
    }
    const level = Number(stamp);
    if (s.name !== s.className || !s.name?.endsWith(stamp)) {
      problems.push(`${s.file}: its class and its name property must both end with ${stamp}`);
    }
    if (!registered.includes(s.name ?? '')) problems.push(`${s.file}: not in migrations/index.ts`);
    if (level <= previous) problems.push(`${s.file}: timestamps must increase`);
    previous = level;
    levels.add(level);
    if (s.contracts.length > 0 && s.contractFloor === undefined) {
      problems.push(
        `${s.file} ${s.contracts.join(' and ')}: that is a contract step — declare contractFloor, the oldest code level that still works after it (its own level if none does), and release it after the expand step`,
      );
    }
    if (s.contractFloor !== undefined) {
      if (s.contractFloor > level) {
        problems.push(
          `${s.file}: contractFloor ${s.contractFloor} is above its own level ${level}`,
        );
      } else if (!levels.has(s.contractFloor)) {
        problems.push(
          `${s.file}: contractFloor ${s.contractFloor} is not the level of a migration`,
        );
      }
      if (s.contractFloor < floor) {
        problems.push(
          `${s.file}: contractFloor ${s.contractFloor} is below the floor already in force (${floor})`,
        );
      }
      floor = Math.max(floor, s.contractFloor);
    }
  }
  const order = registered.filter((n) => byName.has(n));
  if (order.join() !== sources.map((s) => s.name).join()) {
    problems.push('migrations/index.ts must list every migration once, in timestamp order');
  }
  if (schemaLevel !== previous) {
    problems.push(
      `SCHEMA_LEVEL (${schemaLevel}) is not the newest migration's level (${previous})`,
    );
  }
  return problems;
}
