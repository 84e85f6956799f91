import { Global, Module } from '@nestjs/common';
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
  providers: [MetricsService, MetricsSources, MetricsTokenGuard],
  exports: [MetricsService],
})
export class MetricsModule {}
