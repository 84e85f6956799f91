import { Body, Controller, Delete, Get, HttpCode, Param, Post, Put, Query } from '@nestjs/common';
import {
  ApiBearerAuth,
  ApiNoContentResponse,
  ApiOkResponse,
  ApiOperation,
  ApiTags,
} from '@nestjs/swagger';
import { CurrentPrincipal } from '../common/route-auth';
import type { Principal } from '../common/principal';
import { AuthorizationService } from './authorization.service';
import {
  AssignDto,
  CreatePermissionDto,
  CreateRoleDto,
  InitDto,
  SubjectRefDto,
  TestDto,
  UpdatePermissionDto,
  UpdateRoleDto,
} from './dto/rbac.dto';
import { RbacService } from './rbac.service';

/** RBAC management. Everything but `status` and `me` needs `rbac.manage`; `init` is bootstrap-admin's. */
@ApiTags('rbac')
@ApiBearerAuth()
@Controller('v1/rbac')
export class RbacController {
  constructor(
    private readonly rbac: RbacService,
    private readonly authz: AuthorizationService,
  ) {}

  private manage(p: Principal): Promise<void> {
    return this.authz.authorize(p, 'rbac.manage', { unit: '*' });
  }

  @Post('init')
  @HttpCode(201)
  @ApiOperation({
    summary: 'Initialise RBAC once: roles admin and reader, admin assigned to the named subject',
    description:
      'bootstrap-admin only; 409 when already initialised. From then on every action is decided by the rules.',
  })
  init(@Body() dto: InitDto, @CurrentPrincipal() p: Principal) {
    return this.rbac.init(p, dto.admin);
  }

  @Get('status')
  @ApiOperation({ summary: 'Whether RBAC is initialised, and what that means' })
  status() {
    return this.rbac.status();
  }

  @Get('me')
  @ApiOperation({ summary: 'My roles and effective rules' })
  me(@CurrentPrincipal() p: Principal) {
    return this.rbac.me(p);
  }

  @Post('test')
  @HttpCode(200)
  @ApiOperation({
    summary: 'Would this subject be allowed this action on this resource? And which rule decides',
  })
  @ApiOkResponse({ description: '{allowed, reason, rule}' })
  test(@Body() dto: TestDto, @CurrentPrincipal() p: Principal) {
    return this.rbac.test(
      p,
      { subject: dto.subject, email: dto.email, groups: dto.groups },
      dto.action,
      dto.resource,
    );
  }

  @Get('permissions')
  @ApiOperation({ summary: 'Permissions and their rules' })
  async listPermissions(@CurrentPrincipal() p: Principal) {
    await this.manage(p);
    return this.rbac.listPermissions();
  }

  @Post('permissions')
  @ApiOperation({ summary: 'Create a permission (a named set of allow/deny rules)' })
  createPermission(@Body() dto: CreatePermissionDto, @CurrentPrincipal() p: Principal) {
    return this.rbac.createPermission(p, dto.name, dto.description ?? '', dto.rules);
  }

  @Put('permissions/:name')
  @ApiOperation({ summary: 'Change a permission’s description or replace its rules' })
  updatePermission(
    @Param('name') name: string,
    @Body() dto: UpdatePermissionDto,
    @CurrentPrincipal() p: Principal,
  ) {
    return this.rbac.updatePermission(p, name, dto.description, dto.rules);
  }

  @Delete('permissions/:name')
  @HttpCode(204)
  @ApiNoContentResponse()
  @ApiOperation({ summary: 'Delete a permission' })
  async deletePermission(
    @Param('name') name: string,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    await this.rbac.deletePermission(p, name);
  }

  @Get('roles')
  @ApiOperation({ summary: 'Roles and their permissions' })
  async listRoles(@CurrentPrincipal() p: Principal) {
    await this.manage(p);
    return this.rbac.listRoles();
  }

  @Post('roles')
  @ApiOperation({ summary: 'Create a role from permissions' })
  createRole(@Body() dto: CreateRoleDto, @CurrentPrincipal() p: Principal) {
    return this.rbac.createRole(p, dto.name, dto.description ?? '', dto.permissions);
  }

  @Put('roles/:name')
  @ApiOperation({ summary: 'Change a role’s description or replace its permissions' })
  updateRole(
    @Param('name') name: string,
    @Body() dto: UpdateRoleDto,
    @CurrentPrincipal() p: Principal,
  ) {
    return this.rbac.updateRole(p, name, dto.description, dto.permissions);
  }

  @Delete('roles/:name')
  @HttpCode(204)
  @ApiNoContentResponse()
  @ApiOperation({ summary: 'Delete a role (and its assignments)' })
  async deleteRole(@Param('name') name: string, @CurrentPrincipal() p: Principal): Promise<void> {
    await this.rbac.deleteRole(p, name);
  }

  @Get('assignments')
  @ApiOperation({ summary: 'Role assignments (filter by subject, email or group)' })
  async listAssignments(@Query() q: SubjectRefDto, @CurrentPrincipal() p: Principal) {
    await this.manage(p);
    return this.rbac.listAssignments(q);
  }

  @Post('assignments')
  @ApiOperation({ summary: 'Assign a role to a subject, a verified email or an OIDC group' })
  assign(@Body() dto: AssignDto, @CurrentPrincipal() p: Principal) {
    return this.rbac.assign(p, dto.role, {
      subject: dto.subject,
      email: dto.email,
      group: dto.group,
    });
  }

  @Delete('assignments/:id')
  @HttpCode(204)
  @ApiNoContentResponse()
  @ApiOperation({
    summary: 'Remove a role assignment (takes effect within a second on every replica)',
  })
  async unassign(@Param('id') id: string, @CurrentPrincipal() p: Principal): Promise<void> {
    await this.rbac.unassign(p, id);
  }
}
