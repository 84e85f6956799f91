import { Module } from '@nestjs/common';
import { StateModule } from '../state/state.module';
import { LockRepository } from './lock.repository';
import { LocksController } from './locks.controller';
import { LocksService } from './locks.service';

@Module({
  imports: [StateModule],
  controllers: [LocksController],
  providers: [LockRepository, LocksService],
  exports: [LocksService],
})
export class LocksModule {}
