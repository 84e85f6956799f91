import { Module } from '@nestjs/common';
import { InspectionBudget } from './inspection-budget';
import { LockRepository } from './locks/lock.repository';
import { LocksController } from './locks/locks.controller';
import { LocksService } from './locks/locks.service';
import { OutputDigester } from './output-digests';
import { StateRepository } from './state.repository';
import { StateWriteHooks } from './write-hooks';
import { StateAccess } from './state-access';
import { StateReader } from './state-reader';
import { StateWriter } from './state-writer';
import { UnitsService } from './units.service';
import { UnitsController } from './units.controller';

@Module({
  controllers: [UnitsController, LocksController],
  providers: [
    StateRepository,
    LockRepository,
    StateAccess,
    UnitsService,
    StateWriter,
    StateReader,
    LocksService,
    OutputDigester,
    StateWriteHooks,
    InspectionBudget,
  ],
  // StateRepository is exported for its read-only queries (`unitExists`, `currentOutputs`,
  // `firstChangedVersions`): the graph reads units, states and versions only through them.
  exports: [
    StateAccess,
    UnitsService,
    StateWriter,
    StateReader,
    LocksService,
    OutputDigester,
    StateWriteHooks,
    StateRepository,
  ],
})
export class StateModule {}
