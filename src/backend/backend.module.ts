import { Module } from '@nestjs/common';
import { LocksModule } from '../locks/locks.module';
import { StateModule } from '../state/state.module';
import { BackendController } from './backend.controller';

@Module({ imports: [StateModule, LocksModule], controllers: [BackendController] })
export class BackendModule {}
