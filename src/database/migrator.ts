import { ADVISORY_LOCK, withAdvisoryLock } from './transaction';
import { DataSource, MigrationExecutor } from 'typeorm';
import { MIGRATIONS, SCHEMA_LEVEL } from '../../migrations';
import { packageVersion } from '../common/version';
import { StartupError } from '../common/startup';
import {
  CodeSchema,
  judgeSchema,
  recordAfterMigrating,
  refusalMessage,
  SchemaVerdict,
} from './schema-compat';
import { readDatabaseSchema, writeCompatibilityRecord } from './schema-compatibility.repository';

/** Arbitrary, fixed: every replica and `statehouse migrate` take the same advisory lock. */
export const MIGRATION_LOCK_KEY = ADVISORY_LOCK.migrations;

/** This code's schema: its level, its migrations and their contract floors. */
export function codeSchema(): CodeSchema {
  return {
    version: packageVersion(),
    level: SCHEMA_LEVEL,
    migrations: MIGRATIONS.map((M) => {
      const m = new M();
      return { name: m.name ?? M.name, contractFloor: m.contractFloor };
    }),
  };
}

/** How the schema compares with this code, read without any lock (a probe, a wait). */
export async function schemaVerdict(dataSource: DataSource): Promise<SchemaVerdict> {
  return judgeSchema(codeSchema(), await readDatabaseSchema(dataSource));
}

export interface SchemaPreparation {
  /** Migrations applied now. */
  applied: string[];
  /** How the schema compares with this code afterwards (`behind` only when not migrating). */
  verdict: SchemaVerdict;
}

/**
 * Makes sure this code may run against the database: refuses (StartupError) when the schema is
 * newer than the code and no longer accepts it; with `migrate`, applies pending migrations and
 * writes the compatibility record, in one transaction under a session advisory lock, so
 * replicas that start together run them once, in order. Everything goes through one query
 * runner: on the embedded database there is only one connection.
 */
export async function prepareSchema(
  dataSource: DataSource,
  options: { migrate: boolean },
): Promise<SchemaPreparation> {
  const code = codeSchema();
  if (!options.migrate) {
    const verdict = judgeSchema(code, await readDatabaseSchema(dataSource));
    if (verdict.kind === 'refused') throw new StartupError(refusalMessage(code, verdict));
    return { applied: [], verdict };
  }
  return withAdvisoryLock(dataSource, MIGRATION_LOCK_KEY, async (runner) => {
    await runner.startTransaction();
    try {
      const before = await readDatabaseSchema(runner);
      const verdict = judgeSchema(code, before);
      if (verdict.kind === 'refused') throw new StartupError(refusalMessage(code, verdict));
      let applied: string[] = [];
      if (verdict.kind === 'behind') {
        const executor = new MigrationExecutor(dataSource, runner);
        // Inside this transaction (the executor starts none when one is open).
        executor.transaction = 'all';
        applied = (await executor.executePendingMigrations()).map((m) => m.name);
        await writeCompatibilityRecord(runner, recordAfterMigrating(code, before.record));
      }
      await runner.commitTransaction();
      return {
        applied,
        verdict:
          verdict.kind === 'behind' ? judgeSchema(code, await readDatabaseSchema(runner)) : verdict,
      };
    } catch (e) {
      if (runner.isTransactionActive) await runner.rollbackTransaction();
      throw e;
    }
  });
}

/** Applies pending migrations (see prepareSchema); the names of those applied. */
export async function migrateUnderLock(dataSource: DataSource): Promise<string[]> {
  return (await prepareSchema(dataSource, { migrate: true })).applied;
}
