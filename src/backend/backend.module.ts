import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { StateModule } from '../state/state.module';
import { BackendController } from './backend.controller';
import { BackendLockRoute } from './backend-lock.route';
import { BackendReadRoute } from './backend-read.route';

@Module({
  imports: [AuthModule, StateModule],
  controllers: [BackendController],
  providers: [BackendReadRoute, BackendLockRoute],
  exports: [BackendReadRoute, BackendLockRoute],
})
export class BackendModule {}
