import { Module } from '@nestjs/common';
import { StateModule } from '../state/state.module';
import { GraphController } from './graph.controller';
import { GraphRepository } from './graph.repository';
import { GraphService } from './graph.service';

@Module({
  imports: [StateModule],
  controllers: [GraphController],
  providers: [GraphRepository, GraphService],
  exports: [GraphService],
})
export class GraphModule {}
