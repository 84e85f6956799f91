import { Global, Inject, Injectable, Logger, Module, OnApplicationShutdown } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { APP_CONFIG, AppConfig } from '../config/config';
import { createDataSource, databaseTarget } from './data-source';
import { EmbeddedPostgres } from './embedded-postgres';
import { migrateUnderLock } from './migrator';
import { SharedSecrets } from './shared-secrets.service';

/** Owns the database connection for the life of the process. */
@Injectable()
export class DatabaseHandle implements OnApplicationShutdown {
  private readonly logger = new Logger('database');
  dataSource!: DataSource;
  private embedded?: EmbeddedPostgres;

  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  async open(): Promise<DataSource> {
    if (!this.config.databaseUrl) {
      const started = Date.now();
      this.embedded = await EmbeddedPostgres.start(this.config.dataDir);
      this.logger.log(
        `embedded database ready in ${Date.now() - started} ms (data dir ${this.config.dataDir})`,
      );
    }
    try {
      this.dataSource = createDataSource(databaseTarget(this.config, this.embedded?.socketDir));
      await this.dataSource.initialize();
      const applied = await migrateUnderLock(this.dataSource);
      if (applied.length > 0) this.logger.log(`applied migrations: ${applied.join(', ')}`);
      return this.dataSource;
    } catch (e) {
      await this.onApplicationShutdown();
      throw e;
    }
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.dataSource?.isInitialized) await this.dataSource.destroy();
    if (this.embedded) {
      await this.embedded.stop();
      this.embedded = undefined;
    }
  }
}

@Global()
@Module({
  providers: [
    DatabaseHandle,
    SharedSecrets,
    {
      provide: DataSource,
      useFactory: (handle: DatabaseHandle) => handle.open(),
      inject: [DatabaseHandle],
    },
  ],
  exports: [DataSource, SharedSecrets],
})
export class DatabaseModule {}
