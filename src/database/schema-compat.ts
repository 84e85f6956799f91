import type { MigrationInterface } from 'typeorm';

/**
 * Which code may run against which schema. A level is a migration's timestamp: the schema's
 * level is its newest applied migration, the code's level its newest known one
 * (`SCHEMA_LEVEL` in migrations/index.ts). Migrations expand (add what new code needs, old
 * code keeps working) or contract (drop, rename or retype what older code uses); a contract
 * step declares the oldest code level that still works with the schema it leaves, and the
 * database records the highest such floor, so that a rollback after a migration works while
 * code below the floor refuses to start. Pure logic: the SQL is in
 * schema-compatibility.repository.ts.
 */

/** A migration as Statehouse writes them. */
export interface LeveledMigration extends MigrationInterface {
  /**
   * Contract steps only: the oldest code level (a migration timestamp, at most this
   * migration's own) whose code still works with the schema this migration leaves. The rule
   * test (test/unit/migration-rules.spec.ts) requires it on every migration that drops,
   * renames or retypes a column or table.
   */
  readonly contractFloor?: number;
}

/** A migration's level: the timestamp its name ends with (as TypeORM reads it). */
export function levelOf(name: string): number {
  const m = /(\d{13})$/.exec(name);
  if (!m) throw new Error(`migration name ${name} does not end with a 13-digit timestamp`);
  return Number(m[1]);
}

export interface CodeSchema {
  /** The package version, for messages. */
  version: string;
  /** The newest migration this code knows. */
  level: number;
  migrations: { name: string; contractFloor?: number }[];
}

/** What the database holds: applied migrations and the compatibility record (when written). */
export interface DatabaseSchema {
  applied: string[];
  record: CompatibilityRecord | undefined;
}

export interface CompatibilityRecord {
  schemaLevel: number;
  oldestCodeLevel: number;
  migratedBy: string;
  migratedAt: Date;
}

export type SchemaVerdict =
  /** Schema and code are at the same level. */
  | { kind: 'current' }
  /** The code has migrations the database lacks. */
  | { kind: 'behind'; schemaLevel: number; pending: string[] }
  /** The database is newer than the code and still accepts it (a rollback). */
  | { kind: 'newer'; schemaLevel: number; oldestCodeLevel: number; migratedBy: string }
  /** The database is newer than the code and no longer works with it. */
  | { kind: 'refused'; schemaLevel: number; oldestCodeLevel: number; migratedBy: string };

export function judgeSchema(code: CodeSchema, db: DatabaseSchema): SchemaVerdict {
  const schemaLevel = Math.max(db.record?.schemaLevel ?? 0, ...db.applied.map(levelOf));
  const oldestCodeLevel = db.record?.oldestCodeLevel ?? 0;
  const migratedBy = db.record?.migratedBy ?? 'unknown';
  if (oldestCodeLevel > code.level) {
    return { kind: 'refused', schemaLevel, oldestCodeLevel, migratedBy };
  }
  const applied = new Set(db.applied);
  const pending = code.migrations.map((m) => m.name).filter((n) => !applied.has(n));
  if (pending.length > 0) return { kind: 'behind', schemaLevel, pending };
  if (schemaLevel > code.level) return { kind: 'newer', schemaLevel, oldestCodeLevel, migratedBy };
  return { kind: 'current' };
}

/**
 * The record after this code applied its migrations: never lower than what the database
 * recorded before (a newer release may have written it).
 */
export function recordAfterMigrating(
  code: CodeSchema,
  before: CompatibilityRecord | undefined,
): Omit<CompatibilityRecord, 'migratedAt'> {
  const floor = Math.max(0, ...code.migrations.map((m) => m.contractFloor ?? 0));
  const newer = before !== undefined && before.schemaLevel > code.level;
  return {
    schemaLevel: Math.max(before?.schemaLevel ?? 0, code.level),
    oldestCodeLevel: Math.max(before?.oldestCodeLevel ?? 0, floor),
    migratedBy: newer ? before.migratedBy : code.version,
  };
}

/** One line for an operator: why this code does not run against the database, and what to do. */
export function refusalMessage(
  code: CodeSchema,
  v: Extract<SchemaVerdict, { kind: 'refused' }>,
): string {
  return (
    `this Statehouse (${code.version}, schema level ${code.level}) is too old for the database: ` +
    `its schema (level ${v.schemaLevel}, migrated by Statehouse ${v.migratedBy}) runs only with code of schema level ${v.oldestCodeLevel} or later. ` +
    `Run Statehouse ${v.migratedBy} (or another release of schema level ${v.oldestCodeLevel} or later); ` +
    `going back further needs the database backup taken before that migration`
  );
}

/** Why a replica that may not migrate waits, and the command that ends the wait. */
export function behindMessage(
  code: CodeSchema,
  v: Extract<SchemaVerdict, { kind: 'behind' }>,
): string {
  const schema =
    v.schemaLevel === 0 ? 'has no Statehouse schema yet' : `is at schema level ${v.schemaLevel}`;
  return (
    `the database ${schema} and this Statehouse (${code.version}) needs schema level ${code.level} ` +
    `(${v.pending.length} pending migration(s)), which it does not apply itself with STATEHOUSE_MIGRATE=false: ` +
    'run `statehouse migrate` of this release (the migrations Job)'
  );
}

/** The notice of a rollback: the database is newer, and still accepts this code. */
export function newerMessage(
  code: CodeSchema,
  v: Extract<SchemaVerdict, { kind: 'newer' }>,
): string {
  return (
    `the database's schema (level ${v.schemaLevel}, migrated by Statehouse ${v.migratedBy}) is newer than this Statehouse ` +
    `(${code.version}, schema level ${code.level}); it accepts code of schema level ${v.oldestCodeLevel} or later, so this release runs against it`
  );
}
