import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  IsArray,
  IsDefined,
  IsIn,
  IsObject,
  IsOptional,
  IsString,
  MaxLength,
  ValidateNested,
} from 'class-validator';
import { RbacNameLength, UnitNameLength, WorkspaceLength } from '../../common/name-fields';
import { ACTIONS } from '../actions';

export class SubjectRefDto {
  @ApiPropertyOptional({
    example: 'user:00u1abcd',
    description: 'A principal: user:<sub>, svc:<name>',
  })
  @IsOptional()
  @IsString()
  @MaxLength(320)
  subject?: string;

  @ApiPropertyOptional({ example: 'alice@example.com', description: 'A verified email' })
  @IsOptional()
  @IsString()
  @MaxLength(320)
  email?: string;

  @ApiPropertyOptional({ example: 'platform', description: 'An OIDC group' })
  @IsOptional()
  @IsString()
  @MaxLength(320)
  group?: string;
}

export class InitDto {
  @ApiProperty({
    type: SubjectRefDto,
    description: 'Who gets the admin role (exactly one of subject, email, group)',
  })
  @IsDefined()
  @IsObject()
  @ValidateNested()
  @Type(() => SubjectRefDto)
  admin!: SubjectRefDto;
}

export class RuleDto {
  @ApiProperty({ enum: ['allow', 'deny'] })
  @IsIn(['allow', 'deny'])
  effect!: string;

  @ApiProperty({ enum: ACTIONS, isArray: true, example: ['unit.read', 'unit.write'] })
  @IsArray()
  @ArrayMaxSize(32)
  @IsString({ each: true })
  actions!: string[];

  @ApiProperty({
    example: ['team-a/**'],
    description:
      'Globs over unit names: * within a segment, ** across segments; "*" for server-wide actions',
  })
  @IsArray()
  @ArrayMaxSize(100)
  @IsString({ each: true })
  resources!: string[];

  @ApiPropertyOptional({
    example: ['prod'],
    nullable: true,
    description: 'Only in these workspaces (* allowed)',
  })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(100)
  @IsString({ each: true })
  workspaces?: string[] | null;
}

export class CreatePermissionDto {
  @ApiProperty({ example: 'team-a-rw' })
  @IsString()
  name!: string;

  @ApiPropertyOptional()
  @IsOptional()
  @IsString()
  @MaxLength(500)
  description?: string;

  @ApiProperty({ type: [RuleDto] })
  @IsArray()
  @ValidateNested({ each: true })
  @Type(() => RuleDto)
  rules!: RuleDto[];
}

export class UpdatePermissionDto {
  @ApiPropertyOptional()
  @IsOptional()
  @IsString()
  @MaxLength(500)
  description?: string;

  @ApiPropertyOptional({ type: [RuleDto], description: 'Replaces every rule' })
  @IsOptional()
  @IsArray()
  @ValidateNested({ each: true })
  @Type(() => RuleDto)
  rules?: RuleDto[];
}

export class CreateRoleDto {
  @ApiProperty({ example: 'team-a' })
  @IsString()
  name!: string;

  @ApiPropertyOptional()
  @IsOptional()
  @IsString()
  @MaxLength(500)
  description?: string;

  @ApiProperty({ example: ['team-a-rw'] })
  @IsArray()
  @ArrayMaxSize(200)
  @IsString({ each: true })
  permissions!: string[];
}

export class UpdateRoleDto {
  @ApiPropertyOptional()
  @IsOptional()
  @IsString()
  @MaxLength(500)
  description?: string;

  @ApiPropertyOptional({ description: 'Replaces every permission of the role' })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(200)
  @IsString({ each: true })
  permissions?: string[];
}

export class AssignDto extends SubjectRefDto {
  @ApiProperty({ example: 'team-a' })
  @IsString()
  @RbacNameLength()
  role!: string;
}

export class TestResourceDto {
  @ApiProperty({ example: 'team-a/network' })
  @IsString()
  @UnitNameLength()
  unit!: string;

  @ApiPropertyOptional({ example: 'default' })
  @IsOptional()
  @IsString()
  @WorkspaceLength()
  workspace?: string;
}

export class TestDto {
  @ApiPropertyOptional({ example: 'user:00u1abcd' })
  @IsOptional()
  @IsString()
  @MaxLength(320)
  subject?: string;

  @ApiPropertyOptional()
  @IsOptional()
  @IsString()
  @MaxLength(320)
  email?: string;

  @ApiPropertyOptional({ type: [String] })
  @IsOptional()
  @IsArray()
  @IsString({ each: true })
  groups?: string[];

  @ApiProperty({ enum: ACTIONS })
  @IsString()
  action!: string;

  @ApiProperty({ type: TestResourceDto })
  @IsDefined()
  @IsObject()
  @ValidateNested()
  @Type(() => TestResourceDto)
  resource!: TestResourceDto;
}
