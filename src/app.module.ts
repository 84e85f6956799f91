import { DynamicModule, Module } from '@nestjs/common';
import { APP_FILTER, APP_INTERCEPTOR } from '@nestjs/core';
import { LoggerModule } from 'nestjs-pino';
import { AuditModule } from './audit/audit.module';
import { AuthModule } from './auth/auth.module';
import { BackendModule } from './backend/backend.module';
import { ApiExceptionFilter } from './common/api-exception.filter';
import { JsonBodyInterceptor } from './common/body-parsing';
import { appLoggerParams } from './logging/log-output';
import { AppConfig } from './config/config';
import { ConfigModule } from './config/config.module';
import { DatabaseModule } from './database/database.module';
import { ENTITIES } from './entities';
import { HealthModule } from './health/health.module';
import { MetricsModule } from './metrics/metrics.module';
import { MonitoringModule } from './monitoring/monitoring.module';
import { GraphModule } from './graph/graph.module';
import { RbacModule } from './rbac/rbac.module';
import { S3Module } from './s3compat/s3.module';
import { StateModule } from './state/state.module';
import { StorageModule } from './storage/storage.module';
import { TfeModule } from './tfe/tfe.module';

@Module({})
export class AppModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: AppModule,
      imports: [
        ConfigModule.forRoot(config),
        LoggerModule.forRoot(appLoggerParams(config)),
        DatabaseModule.forRoot(ENTITIES),
        StorageModule,
        AuditModule,
        RbacModule,
        AuthModule,
        StateModule,
        BackendModule,
        S3Module,
        TfeModule,
        GraphModule,
        HealthModule,
        MetricsModule,
        MonitoringModule,
      ],
      providers: [
        { provide: APP_FILTER, useClass: ApiExceptionFilter },
        { provide: APP_INTERCEPTOR, useClass: JsonBodyInterceptor },
      ],
    };
  }
}
