import { DataSource, MigrationExecutor, QueryRunner } from 'typeorm';

/** Arbitrary, fixed: every replica and `statehouse migrate` take the same advisory lock. */
export const MIGRATION_LOCK_KEY = 7_337_001;

/**
 * Applies pending migrations while holding a session advisory lock, so replicas that start
 * together run them once, in order. `afterMigrate` runs under the same lock (first-start work
 * that every replica must agree on, such as generating the bootstrap token). Everything goes
 * through one query runner: on the embedded database there is only one connection.
 */
export async function migrateUnderLock(
  dataSource: DataSource,
  afterMigrate?: (runner: QueryRunner) => Promise<void>,
): Promise<string[]> {
  const runner = dataSource.createQueryRunner();
  await runner.connect();
  try {
    await runner.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    try {
      const executor = new MigrationExecutor(dataSource, runner);
      executor.transaction = 'all';
      const applied = await executor.executePendingMigrations();
      if (afterMigrate) await afterMigrate(runner);
      return applied.map((m) => m.name);
    } finally {
      await runner.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
    }
  } finally {
    await runner.release();
  }
}
