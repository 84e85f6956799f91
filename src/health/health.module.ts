import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { StopState } from './stopping';
import { HealthController } from './health.controller';

@Module({
  imports: [TerminusModule.forRoot({ logger: false })],
  controllers: [HealthController],
  providers: [StopState],
  exports: [StopState],
})
export class HealthModule {}
