import { Global, Module } from '@nestjs/common';
import { DATABASE_ERROR_OBSERVER } from '../database/database.module';
import type { DatabaseErrorObserver } from '../database/data-source';
import { BLOB_STORE_FAILURE_OBSERVER, BlobStoreFailureObserver } from '../storage/storage.module';
import { MetricsService } from './metrics.service';

/**
 * The Prometheus registry and its instruments. Other modules record what happens through
 * `MetricsService` (global, optional for them: services built by hand in tests run without it);
 * the database and blob store layers are observed through the two observer tokens, so they
 * import nothing from here. The `/metrics` endpoint, request timing and the gauges read from
 * state and audit are the monitoring module's (`src/monitoring/`), above the doors.
 */
@Global()
@Module({
  providers: [
    MetricsService,
    {
      provide: DATABASE_ERROR_OBSERVER,
      useFactory:
        (metrics: MetricsService): DatabaseErrorObserver =>
        (e, where) =>
          metrics.databaseFailed(e, where),
      inject: [MetricsService],
    },
    {
      provide: BLOB_STORE_FAILURE_OBSERVER,
      useFactory:
        (metrics: MetricsService): BlobStoreFailureObserver =>
        (operation) =>
          metrics.blobStoreFailed(operation),
      inject: [MetricsService],
    },
  ],
  exports: [MetricsService, DATABASE_ERROR_OBSERVER, BLOB_STORE_FAILURE_OBSERVER],
})
export class MetricsModule {}
