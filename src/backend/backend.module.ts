import { Module } from '@nestjs/common';
import { StateModule } from '../state/state.module';
import { BackendController } from './backend.controller';

@Module({ imports: [StateModule], controllers: [BackendController] })
export class BackendModule {}
