import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MIGRATIONS, SCHEMA_LEVEL } from '../../migrations';
import { migrationRuleProblems, readMigrationSource } from '../support/migration-rules';
import { ROOT } from '../support/paths';

const DIR = join(ROOT, 'migrations');
const registered = MIGRATIONS.map((M) => new M().name ?? '');
const sources = () =>
  readdirSync(DIR)
    .filter((f) => f !== 'index.ts' && f.endsWith('.ts'))
    .sort()
    .map((f) => readMigrationSource(f, readFileSync(join(DIR, f), 'utf8')));

/** A migration source whose up() runs `sql`. */
const migration = (stamp: string, sql: string, extra = '') => `
import { QueryRunner } from 'typeorm';
export class Step${stamp} {
  name = 'Step${stamp}';
  ${extra}
  async up(q: QueryRunner): Promise<void> {
    await q.query(\`${sql}\`);
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query(\`DROP TABLE "t"\`);
  }
}`;

/** The problems of the real migrations plus one more (a newer one with `sql`). */
function withNewMigration(sql: string, extra = ''): string[] {
  const stamp = '1999999999999';
  const added = readMigrationSource(`${stamp}-step.ts`, migration(stamp, sql, extra));
  return migrationRuleProblems(
    [...sources(), added],
    [...registered, `Step${stamp}`],
    Number(stamp),
  );
}

describe('migration rules (expand, then contract in a later release)', () => {
  it('every migration in migrations/ keeps them', () => {
    expect(migrationRuleProblems(sources(), registered, SCHEMA_LEVEL)).toEqual([]);
  });

  it('the code knows its schema level: the newest migration', () => {
    expect(SCHEMA_LEVEL).toBe(Number(/(\d{13})$/.exec(registered[registered.length - 1])?.[1]));
  });

  it.each([
    ['drops a table or column', 'ALTER TABLE "units" DROP COLUMN "name"'],
    ['drops a table or column', 'DROP TABLE "units"'],
    ['renames a table or column', 'ALTER TABLE "units" RENAME COLUMN "name" TO "title"'],
    ['renames a table or column', 'ALTER TABLE "units" RENAME TO "things"'],
    ['retypes a column', 'ALTER TABLE "units" ALTER COLUMN "name" TYPE varchar(10)'],
    ['makes a column NOT NULL', 'ALTER TABLE "units" ALTER COLUMN "name" SET NOT NULL'],
    ['adds a NOT NULL column without a default', 'ALTER TABLE "units" ADD "owner" text NOT NULL'],
  ])('a migration that %s without contractFloor is refused', (what, sql) => {
    const problems = withNewMigration(sql);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain(`1999999999999-step.ts ${what}: that is a contract step`);
  });

  it.each([
    ['adds a table', 'CREATE TABLE "t" ("a" text NOT NULL, "b" int NOT NULL)'],
    ['adds a nullable column', 'ALTER TABLE "units" ADD "owner" text'],
    ['adds a NOT NULL column with a default', `ALTER TABLE "units" ADD "n" int NOT NULL DEFAULT 0`],
    ['adds an index', 'CREATE INDEX "ix" ON "units"("name")'],
  ])('a migration that %s is an expand step (no floor needed)', (_what, sql) => {
    expect(withNewMigration(sql)).toEqual([]);
  });

  it('a contract step with a floor at a migration level at or above the floor in force passes', () => {
    expect(
      withNewMigration(
        'ALTER TABLE "units" DROP COLUMN "x"',
        'readonly contractFloor = 1764680000000;',
      ),
    ).toEqual([]);
  });

  it.each([
    ['2000000000000', 'above its own level'],
    ['1764680000001', 'is not the level of a migration'],
    ['1764600000000', 'below the floor already in force (1764640000000)'],
  ])('contractFloor %s is refused: %s', (floor, message) => {
    const problems = withNewMigration(
      'ALTER TABLE "units" DROP COLUMN "x"',
      `readonly contractFloor = ${floor};`,
    );
    expect(problems.join('\n')).toContain(message);
  });

  it('an unregistered migration, and a stale SCHEMA_LEVEL, are named', () => {
    const stamp = '1999999999999';
    const added = readMigrationSource(`${stamp}-step.ts`, migration(stamp, 'SELECT 1'));
    const problems = migrationRuleProblems([...sources(), added], registered, SCHEMA_LEVEL);
    expect(problems).toEqual(
      expect.arrayContaining([
        `${stamp}-step.ts: not in migrations/index.ts`,
        `SCHEMA_LEVEL (${SCHEMA_LEVEL}) is not the newest migration's level (${stamp})`,
      ]),
    );
  });
});
