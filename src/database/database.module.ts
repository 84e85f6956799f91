import {
  DynamicModule,
  Global,
  Inject,
  Injectable,
  Logger,
  Module,
  OnApplicationShutdown,
  Optional,
} from '@nestjs/common';
import { DataSource } from 'typeorm';
import { StartupError } from '../common/startup';
import { APP_CONFIG, AppConfig } from '../config/config';
import {
  createDataSource,
  DatabaseEntities,
  DatabaseErrorObserver,
  databaseTarget,
  StatementCounts,
} from './data-source';
import { DataChanges } from './data-changes';
import { EmbeddedPostgres } from './embedded-postgres';
import { codeSchema, prepareSchema } from './migrator';
import { behindMessage, newerMessage } from './schema-compat';
import { SharedSecrets } from './shared-secrets.service';
import { WatchedTables } from './statement-changes';
import { noteDefaultIsolation } from './transaction';

/** The entity list the root passes to DatabaseModule.forRoot. */
export const DATABASE_ENTITIES = Symbol('DATABASE_ENTITIES');

/**
 * Told of failed statements and broken pooled connections (the metrics module provides it;
 * optional, so the database layer depends on nothing above it).
 */
export const DATABASE_ERROR_OBSERVER = Symbol('DATABASE_ERROR_OBSERVER');

/** How often the embedded database's statistics are refreshed (it has no autovacuum). */
const EMBEDDED_ANALYZE_EVERY_MS = 15 * 60_000;
/**
 * The first refresh, after the start rather than in it: ANALYZE takes ~0.5 s on the one
 * connection, and the statistics of the last refresh are still in the data dir (a new one has
 * empty tables, nothing to learn from).
 */
const EMBEDDED_FIRST_ANALYZE_MS = 60_000;

/** Owns the database connection for the life of the process. */
@Injectable()
export class DatabaseHandle implements OnApplicationShutdown {
  private readonly logger = new Logger('database');
  dataSource!: DataSource;
  /** Every statement this process sends through its pool (see `StatementCounts`). */
  readonly statements = new StatementCounts();
  /** The tables the embedded database's change count watches (`DataChanges.watch` adds them). */
  readonly watched = new WatchedTables();
  private embedded?: EmbeddedPostgres;
  private analyzeTimer?: NodeJS.Timeout;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @Inject(DATABASE_ENTITIES) private readonly entities: DatabaseEntities,
    @Optional()
    @Inject(DATABASE_ERROR_OBSERVER)
    private readonly onError?: DatabaseErrorObserver,
  ) {}

  async open(): Promise<DataSource> {
    if (!this.config.databaseUrl) {
      const started = Date.now();
      this.embedded = await EmbeddedPostgres.start(this.config.dataDir, {
        watched: this.watched,
      });
      this.logger.log(
        `embedded database ready in ${Date.now() - started} ms (data dir ${this.config.dataDir})`,
      );
      const made = { snapshot: 'from the PGlite snapshot', initdb: 'by initdb' };
      if (this.embedded.origin !== 'existing') {
        this.logger.debug(`new embedded database, made ${made[this.embedded.origin]}`);
      }
    }
    try {
      this.dataSource = createDataSource(
        databaseTarget(this.config, this.embedded?.socketDir),
        this.entities,
        (e, where) => this.onError?.(e, where),
        this.statements,
      );
      await this.dataSource.initialize().catch((e: unknown) => {
        throw unreachable(e, this.config.databaseUrl !== undefined);
      });
      const { applied, verdict } = await prepareSchema(this.dataSource, {
        migrate: this.config.migrate,
      });
      if (applied.length > 0) this.logger.log(`applied migrations: ${applied.join(', ')}`);
      // The server waits for the migrations before it gets here (server.ts); nothing of this
      // code runs against a schema older than itself.
      if (verdict.kind === 'behind') {
        throw new StartupError(
          this.embedded
            ? `${behindMessage(codeSchema(), verdict)}, with this server stopped (the embedded database serves one process), or unset STATEHOUSE_MIGRATE`
            : behindMessage(codeSchema(), verdict),
        );
      }
      if (verdict.kind === 'newer') this.logger.warn(newerMessage(codeSchema(), verdict));
      if (!(await noteDefaultIsolation(this.dataSource))) {
        this.logger.warn(
          'the database’s default_transaction_isolation is not read committed: every transaction sets READ COMMITTED itself, one statement more each',
        );
      }
      if (this.embedded) {
        // PGlite runs no autovacuum: without statistics the planner guesses, sometimes badly.
        this.analyzeTimer = setTimeout(() => {
          void this.analyze();
          this.analyzeTimer = setInterval(() => void this.analyze(), EMBEDDED_ANALYZE_EVERY_MS);
          this.analyzeTimer.unref();
        }, EMBEDDED_FIRST_ANALYZE_MS);
        this.analyzeTimer.unref();
      }
      return this.dataSource;
    } catch (e) {
      await this.onApplicationShutdown();
      throw e;
    }
  }

  /** See `DataChanges`: counted on the embedded database only. */
  embeddedChanges(): number | undefined {
    return this.embedded?.changes;
  }

  private async analyze(): Promise<void> {
    const started = Date.now();
    try {
      await this.dataSource.query('ANALYZE');
      this.logger.debug(`ANALYZE took ${Date.now() - started} ms`);
    } catch (e) {
      this.logger.warn({ err: e }, 'ANALYZE failed');
    }
  }

  /**
   * The database closes last: Nest calls every module's `beforeApplicationShutdown` (where the
   * others stop their work and the audit queue is stored) before any `onApplicationShutdown`,
   * and this is the only one of those (test/unit/shutdown-order.spec.ts keeps it so).
   */
  async onApplicationShutdown(): Promise<void> {
    if (this.analyzeTimer) clearInterval(this.analyzeTimer);
    if (this.dataSource?.isInitialized) await this.dataSource.destroy();
    if (this.embedded) {
      await this.embedded.stop();
      this.embedded = undefined;
    }
  }
}

/** Errors of reaching PostgreSQL that an operator fixes (address, credentials, database name). */
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ECONNRESET',
  '28000', // invalid_authorization_specification
  '28P01', // invalid_password
  '3D000', // invalid_catalog_name: no such database
]);

function unreachable(e: unknown, external: boolean): unknown {
  const code = (e as { code?: unknown }).code;
  if (!external || typeof code !== 'string' || !UNREACHABLE.has(code)) return e;
  // pg's messages name the host, user or database, never the password.
  return new StartupError(`cannot use the database of DATABASE_URL: ${(e as Error).message}`, {
    cause: e,
  });
}

/**
 * The connection, for every module. The root passes the entity list, so this layer imports
 * nothing from the feature modules.
 */
@Global()
@Module({})
export class DatabaseModule {
  static forRoot(entities: DatabaseEntities): DynamicModule {
    return {
      module: DatabaseModule,
      providers: [
        { provide: DATABASE_ENTITIES, useValue: entities },
        DatabaseHandle,
        SharedSecrets,
        {
          provide: DataSource,
          useFactory: (handle: DatabaseHandle) => handle.open(),
          inject: [DatabaseHandle],
        },
        {
          provide: DataChanges,
          useFactory: (handle: DatabaseHandle) =>
            new DataChanges(() => handle.embeddedChanges(), handle.watched),
          inject: [DatabaseHandle],
        },
        {
          provide: StatementCounts,
          useFactory: (handle: DatabaseHandle) => handle.statements,
          inject: [DatabaseHandle],
        },
      ],
      exports: [DataSource, SharedSecrets, DataChanges, StatementCounts],
    };
  }
}
