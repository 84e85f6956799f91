import type { LoggerService } from '@nestjs/common';
import type { AppConfig } from '../config/config';
import { StartAborted, StartupError } from '../common/startup';
import { createDataSource, databaseTarget } from './data-source';
import { codeSchema, schemaVerdict } from './migrator';
import { behindMessage, refusalMessage } from './schema-compat';

/** How often a waiting server looks at the schema again. */
const POLL_MS = 2000;
/** How often it repeats in the log why it waits. */
const REMIND_MS = 60_000;

export interface Standby {
  close: () => Promise<void>;
}

/**
 * STATEHOUSE_MIGRATE=false on PostgreSQL: before anything of this release runs against the
 * database, waits until its schema has this release's migrations (the migrations Job runs
 * them), with `openStandby` answering the probes meanwhile (not ready, alive). Returns the
 * standby still open (saying "starting"; the caller closes it just before the server listens),
 * or undefined when there was nothing to wait for. Every other answer is left to the server's
 * own start (an unreachable database, a schema too new for this code).
 */
export async function waitForMigrations(
  config: AppConfig,
  openStandby: (reason: () => string) => Promise<Standby>,
  logger: LoggerService,
  stop?: AbortSignal,
): Promise<Standby | undefined> {
  const code = codeSchema();
  // Only raw SQL on the schema tables here: no entity is mapped.
  const ds = createDataSource({ ...databaseTarget(config), poolSize: 1 }, []);
  let standby: Standby | undefined;
  let reason = '';
  let waited = false;
  try {
    await ds.initialize().catch(() => undefined);
    if (!ds.isInitialized) return undefined;
    let reminded = 0;
    for (;;) {
      const verdict = await schemaVerdict(ds).catch(() => undefined);
      if (verdict?.kind === 'refused') throw new StartupError(refusalMessage(code, verdict));
      if (verdict !== undefined && verdict.kind !== 'behind') break;
      if (verdict) reason = `not ready: ${behindMessage(code, verdict)}`;
      else if (reason === '') reason = 'not ready: the database does not answer';
      standby ??= await openStandby(() => reason);
      if (Date.now() - reminded >= REMIND_MS) {
        logger.warn(`${reason}; waiting (/readyz answers 503 until then)`, 'database');
        reminded = Date.now();
      }
      await sleep(POLL_MS, stop);
    }
    if (standby) {
      logger.log("the schema has this release's migrations now: starting", 'database');
      reason = 'not ready: starting';
    }
    waited = true;
    return standby;
  } finally {
    if (!waited) await standby?.close();
    if (ds.isInitialized) await ds.destroy();
  }
}

function sleep(ms: number, stop?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const aborted = () => {
      clearTimeout(timer);
      reject(new StartAborted(String(stop?.reason)));
    };
    if (stop?.aborted) return aborted();
    const timer = setTimeout(() => {
      stop?.removeEventListener('abort', aborted);
      resolve();
    }, ms);
    stop?.addEventListener('abort', aborted, { once: true });
  });
}
