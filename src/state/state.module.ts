import { Module } from '@nestjs/common';
import { StateRepository } from './state.repository';
import { StateService } from './state.service';
import { UnitsController } from './units.controller';

@Module({
  controllers: [UnitsController],
  providers: [StateRepository, StateService],
  exports: [StateService],
})
export class StateModule {}
