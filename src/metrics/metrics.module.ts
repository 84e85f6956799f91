import { Global, Module } from '@nestjs/common';
import { DATABASE_ERROR_OBSERVER } from '../database/database.module';
import type { DatabaseErrorObserver } from '../database/data-source';
import { StateModule } from '../state/state.module';
import { MetricsController } from './metrics.controller';
import { MetricsSources } from './metrics-sources';
import { MetricsTokenGuard } from './metrics-token.guard';
import { MetricsService } from './metrics.service';

/**
 * Prometheus metrics at `/metrics` on the main listener. Other modules record what happens
 * through `MetricsService` (global, optional for them: services built by hand in tests run
 * without it); every request is timed by `requestMetrics`, which `createApp` mounts.
 */
@Global()
@Module({
  imports: [StateModule],
  controllers: [MetricsController],
  providers: [
    MetricsService,
    MetricsSources,
    MetricsTokenGuard,
    {
      provide: DATABASE_ERROR_OBSERVER,
      useFactory:
        (metrics: MetricsService): DatabaseErrorObserver =>
        (e, where) =>
          metrics.databaseFailed(e, where),
      inject: [MetricsService],
    },
  ],
  exports: [MetricsService, DATABASE_ERROR_OBSERVER],
})
export class MetricsModule {}
