import { Controller, Delete, Get, HttpCode, Param, Post, Query, Req } from '@nestjs/common';
import {
  ApiBearerAuth,
  ApiBody,
  ApiConflictResponse,
  ApiNoContentResponse,
  ApiOkResponse,
  ApiOperation,
  ApiParam,
  ApiProperty,
  ApiTags,
} from '@nestjs/swagger';
import { IsString, MaxLength, MinLength } from 'class-validator';
import type { Request } from 'express';
import { CurrentPrincipal } from '../../common/route-auth';
import type { Principal } from '../../common/principal';
import { assertWorkspace } from '../../common/names';
import { RawBody } from '../../common/body-parsing';
import { readSmallBody } from '../../common/raw-body';
import { WorkspaceQuery } from '../dto/state.dto';
import { MAX_LOCK_INFO_BYTES } from './lock-info';
import { LocksService } from './locks.service';
import { lockView, LockView } from './locks.views';

class ReleaseQuery extends WorkspaceQuery {
  @ApiProperty({ description: 'The ID of the lock being released' })
  @IsString()
  @MinLength(1)
  @MaxLength(256)
  id!: string;
}

class ForceUnlockResult {
  @ApiProperty({ description: 'Whether a lock was held (and removed)' })
  released!: boolean;
  @ApiProperty({ type: LockView, required: false, nullable: true })
  lock!: LockView | null;
}

const NAME = {
  name: 'name',
  description: 'Unit name, URL-encoded',
  example: 'team-a%2Fnetwork%2Fprod',
};

@ApiTags('locks')
@ApiBearerAuth()
@Controller('v1')
export class LocksController {
  constructor(private readonly locks: LocksService) {}

  @Get('locks')
  @ApiOperation({ summary: 'Held locks the caller may see, with their age' })
  @ApiOkResponse({ type: [LockView] })
  list(@CurrentPrincipal() p: Principal): Promise<LockView[]> {
    return this.locks.list(p);
  }

  @Get('units/:name/lock')
  @ApiParam(NAME)
  @ApiOperation({ summary: 'The lock held on a workspace’s state (404 when unlocked)' })
  @ApiOkResponse({ type: LockView })
  get(
    @Param('name') name: string,
    @Query() q: WorkspaceQuery,
    @CurrentPrincipal() p: Principal,
  ): Promise<LockView> {
    return this.locks.get(p, { unit: name, workspace: assertWorkspace(q.workspace) });
  }

  @Post('units/:name/lock')
  @RawBody()
  @HttpCode(200)
  @ApiParam(NAME)
  @ApiBody({
    description: 'A Terraform LockInfo (`ID` is generated when absent); stored as sent',
    schema: {
      type: 'object',
      example: { ID: '6f1c…', Operation: 'OperationTypeApply', Who: 'ci@runner' },
    },
    required: false,
  })
  @ApiOperation({
    summary: 'Acquire the lock Terraform sees through every door',
    description:
      'Retrying with the same principal and ID succeeds again; a held lock answers 409 with the holder’s LockInfo.',
  })
  @ApiOkResponse({ type: LockView })
  @ApiConflictResponse({ description: 'Locked by someone else; body names the holder' })
  async acquire(
    @Param('name') name: string,
    @Query() q: WorkspaceQuery,
    @CurrentPrincipal() p: Principal,
    @Req() req: Request,
  ): Promise<LockView> {
    const workspace = assertWorkspace(q.workspace);
    const body = await readSmallBody(req, MAX_LOCK_INFO_BYTES);
    const held = await this.locks.acquire(p, { unit: name, workspace }, body, {
      generateId: true,
      door: 'api',
    });
    return lockView(name, workspace, held);
  }

  @Delete('units/:name/lock')
  @HttpCode(204)
  @ApiParam(NAME)
  @ApiOperation({
    summary: 'Release a lock you hold',
    description: 'A retried release whose first answer was lost succeeds again.',
  })
  @ApiNoContentResponse()
  async release(
    @Param('name') name: string,
    @Query() q: ReleaseQuery,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    await this.locks.release(p, { unit: name, workspace: assertWorkspace(q.workspace) }, q.id);
  }

  @Post('units/:name/force-unlock')
  @HttpCode(200)
  @ApiParam(NAME)
  @ApiOperation({ summary: 'Remove whatever lock is held (needs unit.force-unlock; audited)' })
  @ApiOkResponse({ type: ForceUnlockResult })
  async forceUnlock(
    @Param('name') name: string,
    @Query() q: WorkspaceQuery,
    @CurrentPrincipal() p: Principal,
  ): Promise<ForceUnlockResult> {
    const workspace = assertWorkspace(q.workspace);
    const removed = await this.locks.forceUnlock(p, { unit: name, workspace }, 'api');
    return {
      released: removed !== undefined,
      lock: removed ? lockView(name, workspace, removed) : null,
    };
  }
}
