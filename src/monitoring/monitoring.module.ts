import { Module } from '@nestjs/common';
import { StateModule } from '../state/state.module';
import { MetricsController } from './metrics.controller';
import { MetricsSources } from './metrics-sources';
import { MetricsTokenGuard } from './metrics-token.guard';

/**
 * `/metrics` on the main listener (optionally behind STATEHOUSE_METRICS_TOKEN), and the metrics
 * read at scrape time from the modules below: held locks (state), the audit log's losses and the
 * authentication failures (audit), the connection pool. Every request is timed by
 * `requestMetrics` (this module's), which `createApp` mounts; what each door calls its
 * operations is the door's own (`s3compat/s3-operation.ts`, `backend/backend-operation.ts`).
 */
@Module({
  imports: [StateModule],
  controllers: [MetricsController],
  providers: [MetricsSources, MetricsTokenGuard],
})
export class MonitoringModule {}
