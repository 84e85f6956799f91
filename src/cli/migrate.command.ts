import type { AppConfig } from '../config/config';
import { createDataSource, databaseTarget } from '../database/data-source';
import { EmbeddedPostgres } from '../database/embedded-postgres';
import { codeSchema, prepareSchema } from '../database/migrator';
import { newerMessage } from '../database/schema-compat';
import { schemaDrift } from '../database/schema-check';
import { ENTITIES } from '../entities';

/** `statehouse migrate [--check]`: returns the process exit code. */
export async function runMigrateCommand(config: AppConfig, check: boolean): Promise<number> {
  const embedded = config.databaseUrl ? undefined : await EmbeddedPostgres.start(config.dataDir);
  const ds = createDataSource(databaseTarget(config, embedded?.socketDir), ENTITIES);
  try {
    await ds.initialize();
    // STATEHOUSE_MIGRATE is for `serve`: this command is how a deployment migrates.
    const { applied, verdict } = await prepareSchema(ds, { migrate: true });
    process.stdout.write(
      applied.length > 0 ? `applied: ${applied.join(', ')}\n` : 'no pending migrations\n',
    );
    if (verdict.kind === 'newer') process.stdout.write(`${newerMessage(codeSchema(), verdict)}\n`);
    if (!check) return 0;
    const drift = await schemaDrift(ds);
    if (drift.length === 0) {
      process.stdout.write('entities and migrations agree\n');
      return 0;
    }
    process.stderr.write(
      `entities and migrations disagree; a migration is missing for:\n${drift.map((q) => `  ${q};`).join('\n')}\n`,
    );
    return 1;
  } finally {
    if (ds.isInitialized) await ds.destroy();
    await embedded?.stop();
  }
}
