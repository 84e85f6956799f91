import { Client, Pool, QueryConfig } from 'pg';
import { AdvancedConsoleLogger, DataSource, DataSourceOptions, QueryRunner } from 'typeorm';
import { MIGRATIONS } from '../../migrations';
import type { AppConfig } from '../config/config';
import { EMBEDDED_SOCKET_PORT } from './embedded-postgres';
import { allowNamedStatements } from './pooled-statement';

export interface DatabaseTarget {
  /** A postgres:// URL, or the socket directory of the embedded database. */
  url?: string;
  socketDir?: string;
  poolSize: number;
}

export function databaseTarget(config: AppConfig, embeddedSocketDir?: string): DatabaseTarget {
  if (config.databaseUrl) {
    return { url: config.databaseUrl.reveal(), poolSize: config.databasePoolSize };
  }
  if (!embeddedSocketDir) throw new Error('embedded database is not started');
  return { socketDir: embeddedSocketDir, poolSize: 1 };
}

/** The entity classes a data source maps: the root's list (src/entities.ts). */
export type DatabaseEntities = NonNullable<DataSourceOptions['entities']>;

/** Told of every failed statement, and of every pooled connection that broke while idle. */
export type DatabaseErrorObserver = (e: unknown, where: 'query' | 'pool') => void;

/**
 * Statements sent to the database through a data source's pool, counted as they are sent (an
 * integer increment; the SQL's first characters are compared, nothing is parsed). `audit` is
 * the INSERTs into `audit_events` (the batched inserts of queued events, and the rows written
 * inside a write's transaction), recognised by the statement start the audit module, which owns
 * that table, registers as `auditPrefix`; `other` everything else, transaction control included. On the
 * embedded database the same `pg` client speaks to PGlite through the bridge, so both databases
 * are counted in the one place.
 */
export class StatementCounts {
  audit = 0;
  other = 0;
  /** How the audit log's INSERT starts; set by the audit module (`AuditService`). */
  auditPrefix: string | undefined;
}

/** A `pg` Client class whose every query is counted in `counts`. */
function countedClient(counts: StatementCounts): typeof Client {
  return class CountedClient extends Client {
    // pg's query has many overloads; they all take the statement first.
    override query(...args: unknown[]): never {
      const first = args[0];
      const text = typeof first === 'string' ? first : (first as QueryConfig | undefined)?.text;
      if (counts.auditPrefix !== undefined && text?.startsWith(counts.auditPrefix)) counts.audit++;
      else counts.other++;
      return (super.query as (...a: unknown[]) => never)(...args);
    }
  };
}

/**
 * One data source for the server, the migration command and the tests. The embedded database
 * gets a one-connection pool (PGlite is one session); a connection timeout turns the classic
 * one-connection mistake (a query outside the open transaction's manager) into an error
 * instead of a hang.
 */
export function createDataSource(
  target: DatabaseTarget,
  entities: DatabaseEntities,
  onError?: DatabaseErrorObserver,
  statements?: StatementCounts,
): DataSource {
  const embedded = target.socketDir !== undefined;
  const ds = new DataSource({
    type: 'postgres',
    ...(embedded
      ? {
          host: target.socketDir,
          port: EMBEDDED_SOCKET_PORT,
          username: 'postgres',
          database: 'postgres',
        }
      : { url: target.url }),
    entities,
    migrations: MIGRATIONS,
    migrationsTableName: 'schema_migrations',
    uuidExtension: 'pgcrypto',
    // PGlite has no pgcrypto (nor needs it: gen_random_uuid() is built into PostgreSQL 13+).
    // TypeORM's `CREATE EXTENSION IF NOT EXISTS` on connecting only failed there, on every
    // start (a failed statement costs PGlite its error recovery, ~100 ms).
    installExtensions: !embedded,
    synchronize: false,
    migrationsRun: false,
    logging: false,
    ...(onError
      ? {
          logger: new ObservedLogger(onError),
          poolErrorHandler: (e: unknown) => onError(e, 'pool'),
        }
      : {}),
    extra: {
      ...(statements ? { Client: countedClient(statements) } : {}),
      max: target.poolSize,
      connectionTimeoutMillis: embedded ? 60_000 : 10_000,
      // A server that stops answering must become a 503, not a request that hangs forever.
      ...(embedded ? {} : { statement_timeout: 30_000, query_timeout: 35_000 }),
    },
  });
  // PGlite's one session outlives the pool's connections: a statement prepared there would
  // still exist when the next connection prepares it again.
  if (!embedded) allowNamedStatements(ds);
  return ds;
}

/** TypeORM's own logger (logging off, as before), telling the observer of failed statements. */
class ObservedLogger extends AdvancedConsoleLogger {
  constructor(private readonly onError: DatabaseErrorObserver) {
    super(false);
  }

  override logQueryError(
    error: string,
    query: string,
    parameters?: unknown[],
    queryRunner?: QueryRunner,
  ): void {
    this.onError(error, 'query');
    super.logQueryError(error, query, parameters, queryRunner);
  }
}

/** How the connection pool is used right now (undefined before it is open). */
export interface PoolUse {
  /** Connections open, idle or lent out. */
  total: number;
  idle: number;
  /** Callers waiting for a connection. */
  waiting: number;
  max: number;
}

export function poolUse(ds: DataSource): PoolUse | undefined {
  // TypeORM's postgres driver keeps its pg pool as `master`.
  const pool = (ds.driver as unknown as { master?: Pool }).master;
  if (!pool) return undefined;
  return {
    total: pool.totalCount,
    idle: pool.idleCount,
    waiting: pool.waitingCount,
    max: pool.options.max ?? 10,
  };
}
