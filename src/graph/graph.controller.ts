import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query, Res } from '@nestjs/common';
import {
  ApiBearerAuth,
  ApiConflictResponse,
  ApiCreatedResponse,
  ApiNoContentResponse,
  ApiOkResponse,
  ApiOperation,
  ApiParam,
  ApiProduces,
  ApiTags,
} from '@nestjs/swagger';
import type { Response } from 'express';
import { CurrentPrincipal } from '../common/route-auth';
import type { Principal } from '../common/principal';
import { WorkspaceQuery } from '../state/dto/state.dto';
import {
  DeclareEdgeDto,
  EdgeViewDoc,
  GraphQuery,
  GraphViewDoc,
  StaleQuery,
  StaleViewDoc,
  UnitStatusViewDoc,
} from './dto/graph.dto';
import { DeclaredEdgesService } from './declared-edges.service';
import { GraphService } from './graph.service';
import { EdgeView, GraphView, StaleView, UnitStatusView } from './graph.views';

const CONTENT_TYPES = {
  dot: 'text/vnd.graphviz; charset=utf-8',
  mermaid: 'text/plain; charset=utf-8',
} as const;

/** The dependency graph between states, and what is stale. Everything is filtered by `graph.read`. */
@ApiTags('graph')
@ApiBearerAuth()
@Controller('v1')
export class GraphController {
  constructor(
    private readonly graph: GraphService,
    private readonly edges: DeclaredEdgesService,
  ) {}

  @Get('graph')
  @ApiOperation({
    summary:
      'The dependency graph (or the part touching a prefix), as JSON, Graphviz DOT or Mermaid',
    description:
      'Edges come from consumers’ terraform_remote_state data sources (discovered on each write) and from declarations. Only states the caller may `graph.read` appear; statuses are computed over the whole graph.',
  })
  @ApiProduces('application/json', CONTENT_TYPES.dot, CONTENT_TYPES.mermaid)
  @ApiOkResponse({ type: GraphViewDoc })
  async get(
    @Query() q: GraphQuery,
    @CurrentPrincipal() p: Principal,
    @Res({ passthrough: true }) res: Response,
  ): Promise<GraphView | string> {
    const format = q.format ?? 'json';
    if (format === 'json') return (await this.graph.graph(p, q.prefix ?? '')).view;
    res.setHeader('Content-Type', CONTENT_TYPES[format]);
    return this.graph.render(p, q.prefix ?? '', format);
  }

  @Get('graph/stale')
  @ApiOperation({
    summary: 'What needs applying, in dependency order (producers first)',
    description:
      'Red: an input is stale (which edge, which outputs, since which producer version). Yellow: something upstream is red. Cycles are reported separately.',
  })
  @ApiOkResponse({ type: StaleViewDoc })
  stale(@Query() q: StaleQuery, @CurrentPrincipal() p: Principal): Promise<StaleView> {
    return this.graph.stale(p, q.prefix ?? '');
  }

  @Post('graph/edges')
  @ApiOperation({
    summary: 'Declare that one state feeds another (needs graph.write on both)',
    description:
      'Optionally only some of the producer’s outputs matter. The consumer is taken to be current when declared; its next write records the producer’s outputs again.',
  })
  @ApiCreatedResponse({ type: EdgeViewDoc })
  @ApiConflictResponse({ description: 'An edge with this name between these states exists' })
  declare(@Body() dto: DeclareEdgeDto, @CurrentPrincipal() p: Principal): Promise<EdgeView> {
    return this.edges.declare(p, dto);
  }

  @Delete('graph/edges/:id')
  @HttpCode(204)
  @ApiOperation({
    summary: 'Remove a declared edge (needs graph.write on both ends)',
    description: 'Discovered edges follow the consumer’s state and cannot be removed here (409).',
  })
  @ApiNoContentResponse()
  async remove(@Param('id') id: string, @CurrentPrincipal() p: Principal): Promise<void> {
    await this.edges.remove(p, id);
  }

  @Get('units/:name/status')
  @ApiParam({
    name: 'name',
    description: 'Unit name, URL-encoded (`team-a%2Fnetwork%2Fprod`)',
    example: 'team-a%2Fnetwork%2Fprod',
  })
  @ApiOperation({
    summary:
      'green (inputs current), red (an input is stale) or yellow (something upstream is red)',
  })
  @ApiOkResponse({ type: UnitStatusViewDoc })
  status(
    @Param('name') name: string,
    @Query() q: WorkspaceQuery,
    @CurrentPrincipal() p: Principal,
  ): Promise<UnitStatusView> {
    return this.graph.unitStatus(p, name, q.workspace ?? 'default');
  }
}
