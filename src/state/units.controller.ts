import {
  Body,
  Controller,
  Delete,
  Get,
  HttpCode,
  Param,
  ParseIntPipe,
  Post,
  Put,
  Query,
  Req,
  Res,
} from '@nestjs/common';
import {
  ApiBearerAuth,
  ApiBody,
  ApiConflictResponse,
  ApiConsumes,
  ApiCreatedResponse,
  ApiNoContentResponse,
  ApiOkResponse,
  ApiOperation,
  ApiParam,
  ApiProduces,
  ApiTags,
} from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { CurrentPrincipal } from '../common/route-auth';
import type { Principal } from '../common/principal';
import { RawBody } from '../common/body-parsing';
import { assertWorkspace } from '../common/names';
import { declaredLength, headerValue } from '../common/raw-body';
import { sendState } from './state-response';
import {
  CreateUnitDto,
  ListUnitsQuery,
  ListVersionsQuery,
  WorkspaceQuery,
  WriteStateQuery,
} from './dto/state.dto';
import { StateReader } from './state-reader';
import { StateWriter } from './state-writer';
import { UnitsService } from './units.service';
import {
  OutputsView,
  UnitDetailView,
  UnitPageView,
  UnitView,
  VersionPageView,
  WorkspaceView,
  WriteResultView,
} from './state.views';

const NAME = {
  name: 'name',
  description: 'Unit name, URL-encoded (`team-a%2Fnetwork%2Fprod`)',
  example: 'team-a%2Fnetwork%2Fprod',
};

/** Units, their state, versions and workspaces over the management API. */
@ApiTags('units')
@ApiBearerAuth()
@Controller('v1/units')
export class UnitsController {
  constructor(
    private readonly units: UnitsService,
    private readonly reader: StateReader,
    private readonly writer: StateWriter,
  ) {}

  @Post()
  @ApiOperation({ summary: 'Create a unit (its `default` workspace exists at once)' })
  @ApiCreatedResponse({ type: UnitView })
  @ApiConflictResponse({ description: 'The name is taken (or belongs to a deleted unit)' })
  create(@Body() dto: CreateUnitDto, @CurrentPrincipal() p: Principal): Promise<UnitView> {
    return this.units.createUnit(p, dto.name);
  }

  @Get()
  @ApiOperation({ summary: 'List units the caller may read, by name, with cursor pagination' })
  @ApiOkResponse({ type: UnitPageView })
  list(@Query() q: ListUnitsQuery, @CurrentPrincipal() p: Principal): Promise<UnitPageView> {
    return this.units.listUnits(p, q.prefix ?? '', q.limit ?? 100, q.cursor);
  }

  @Get(':name')
  @ApiParam(NAME)
  @ApiOperation({ summary: 'Get a unit and its workspaces' })
  @ApiOkResponse({ type: UnitDetailView })
  get(@Param('name') name: string, @CurrentPrincipal() p: Principal): Promise<UnitDetailView> {
    return this.units.getUnit(p, name);
  }

  @Delete(':name')
  @HttpCode(204)
  @ApiParam(NAME)
  @ApiOperation({
    summary: 'Delete a unit (soft: versions stay listed and restorable until purged)',
    description: 'Refused with 409 and the holder’s LockInfo while any workspace is locked.',
  })
  @ApiNoContentResponse()
  async remove(@Param('name') name: string, @CurrentPrincipal() p: Principal): Promise<void> {
    await this.units.deleteUnit(p, name, 'api');
  }

  @Post(':name/undelete')
  @HttpCode(204)
  @ApiParam(NAME)
  @ApiOperation({
    summary: 'Undelete a unit, or with `workspace` one deleted workspace state',
  })
  @ApiNoContentResponse()
  async undelete(
    @Param('name') name: string,
    @Query() q: WorkspaceQuery,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    await this.units.undelete(
      p,
      name,
      q.workspace === undefined ? undefined : assertWorkspace(q.workspace),
    );
  }

  @Post(':name/purge')
  @HttpCode(204)
  @ApiParam(NAME)
  @ApiOperation({
    summary:
      'Irreversibly remove a deleted unit (or with `workspace`, a deleted workspace state) and its versions',
  })
  @ApiNoContentResponse()
  async purge(
    @Param('name') name: string,
    @Query() q: WorkspaceQuery,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    await this.units.purge(
      p,
      name,
      q.workspace === undefined ? undefined : assertWorkspace(q.workspace),
    );
  }

  @Get(':name/workspaces')
  @ApiParam(NAME)
  @ApiOperation({ summary: 'List the unit’s workspaces' })
  @ApiOkResponse({ type: [WorkspaceView] })
  workspaces(
    @Param('name') name: string,
    @CurrentPrincipal() p: Principal,
  ): Promise<WorkspaceView[]> {
    return this.units.listWorkspaces(p, name);
  }

  @Get(':name/state')
  @ApiParam(NAME)
  @ApiProduces('application/json')
  @ApiOperation({ summary: 'Download the current state, byte for byte' })
  @ApiOkResponse({ description: 'The state; `X-Statehouse-Version` names its version' })
  async getState(
    @Param('name') name: string,
    @Query() q: WorkspaceQuery,
    @CurrentPrincipal() p: Principal,
    @Res() res: Response,
  ): Promise<void> {
    const opened = await this.reader.openCurrent(p, {
      unit: name,
      workspace: assertWorkspace(q.workspace),
    });
    await sendState(res, opened);
  }

  @Put(':name/state')
  @RawBody()
  @ApiParam(NAME)
  @ApiConsumes('application/json')
  @ApiBody({
    description: 'A Terraform v4 state or an OpenTofu encrypted state, sent raw',
    required: true,
  })
  @ApiOperation({
    summary: 'Upload a new state version',
    description:
      'Subject to the serial guard. While the state is locked the holder must pass `lock_id`. Byte-identical uploads create no version.',
  })
  @ApiOkResponse({ type: WriteResultView })
  putState(
    @Param('name') name: string,
    @Query() q: WriteStateQuery,
    @CurrentPrincipal() p: Principal,
    @Req() req: Request,
  ): Promise<WriteResultView> {
    return this.writer.write({
      unit: name,
      workspace: assertWorkspace(q.workspace),
      principal: p,
      door: 'api',
      body: req,
      lockId: q.lock_id,
      contentLength: declaredLength(req.headers['content-length']),
      contentMd5: headerValue(req.headers['content-md5']),
    });
  }

  @Delete(':name/state')
  @HttpCode(204)
  @ApiParam(NAME)
  @ApiOperation({ summary: 'Delete a workspace’s state (soft: its versions stay restorable)' })
  @ApiNoContentResponse()
  async deleteState(
    @Param('name') name: string,
    @Query() q: WriteStateQuery,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    await this.writer.deleteState(
      p,
      { unit: name, workspace: assertWorkspace(q.workspace) },
      'api',
      q.lock_id,
    );
  }

  @Get(':name/outputs')
  @ApiParam(NAME)
  @ApiOperation({ summary: 'Outputs of the current state' })
  @ApiOkResponse({ type: OutputsView })
  outputs(
    @Param('name') name: string,
    @Query() q: WorkspaceQuery,
    @CurrentPrincipal() p: Principal,
  ): Promise<OutputsView> {
    return this.reader.outputs(p, { unit: name, workspace: assertWorkspace(q.workspace) });
  }

  @Get(':name/versions')
  @ApiParam(NAME)
  @ApiOperation({ summary: 'List versions, newest first (also for deleted states, until purged)' })
  @ApiOkResponse({ type: VersionPageView })
  versions(
    @Param('name') name: string,
    @Query() q: ListVersionsQuery,
    @CurrentPrincipal() p: Principal,
  ): Promise<VersionPageView> {
    return this.reader.listVersions(
      p,
      { unit: name, workspace: assertWorkspace(q.workspace) },
      q.limit ?? 100,
      q.cursor,
    );
  }

  @Get(':name/versions/:version')
  @ApiParam(NAME)
  @ApiParam({ name: 'version', description: 'Per-state version number', example: 1 })
  @ApiProduces('application/json')
  @ApiOperation({ summary: 'Download the content of one version, byte for byte' })
  async version(
    @Param('name') name: string,
    @Param('version', ParseIntPipe) version: number,
    @Query() q: WorkspaceQuery,
    @CurrentPrincipal() p: Principal,
    @Res() res: Response,
  ): Promise<void> {
    const opened = await this.reader.openVersion(
      p,
      { unit: name, workspace: assertWorkspace(q.workspace) },
      version,
    );
    await sendState(res, opened);
  }

  @Post(':name/versions/:version/restore')
  @HttpCode(200)
  @ApiParam(NAME)
  @ApiParam({ name: 'version', example: 1 })
  @ApiOperation({
    summary: 'Make an old version current again, as a new version with the same bytes',
    description:
      'Refused with 409 and the holder’s LockInfo while another principal holds the lock.',
  })
  @ApiOkResponse({ type: WriteResultView })
  restore(
    @Param('name') name: string,
    @Param('version', ParseIntPipe) version: number,
    @Query() q: WriteStateQuery,
    @CurrentPrincipal() p: Principal,
  ): Promise<WriteResultView> {
    return this.writer.restore(
      p,
      { unit: name, workspace: assertWorkspace(q.workspace) },
      version,
      q.lock_id,
    );
  }
}
