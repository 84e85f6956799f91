import { Module } from '@nestjs/common';
import { StateModule } from '../state/state.module';
import { GraphWriteHook } from './graph-write-hook';
import { GraphController } from './graph.controller';
import { GraphRepository } from './graph.repository';
import { DeclaredEdgesService } from './declared-edges.service';
import { GraphService } from './graph.service';

@Module({
  imports: [StateModule],
  controllers: [GraphController],
  providers: [GraphRepository, GraphService, DeclaredEdgesService, GraphWriteHook],
  exports: [GraphService, GraphWriteHook],
})
export class GraphModule {}
