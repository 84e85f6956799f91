import { Module } from '@nestjs/common';
import { InspectionBudget } from './inspection-budget';
import { OutputDigester } from './output-digester';
import { StateRepository } from './state.repository';
import { StateWriteHooks } from './write-hooks';
import { StateService } from './state.service';
import { UnitsController } from './units.controller';

@Module({
  controllers: [UnitsController],
  providers: [StateRepository, StateService, OutputDigester, StateWriteHooks, InspectionBudget],
  exports: [StateService, OutputDigester, StateWriteHooks],
})
export class StateModule {}
