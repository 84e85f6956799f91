import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, IsString, Matches, MaxLength } from 'class-validator';
import { UnitNameLength } from '../../common/name-fields';
import { PageCursor, PageLimit } from '../../common/page-fields';

export class CreateUnitDto {
  @ApiProperty({
    example: 'team-a/network/prod',
    description: 'Segments of [A-Za-z0-9._-] joined by "/"',
  })
  @IsString()
  name!: string;
}

export class WorkspaceQuery {
  @ApiPropertyOptional({ example: 'default', description: 'Workspace (default `default`)' })
  @IsOptional()
  @IsString()
  workspace?: string;
}

export class WriteStateQuery extends WorkspaceQuery {
  @ApiPropertyOptional({
    description: 'ID of the lock the writer holds (required while the state is locked)',
  })
  @IsOptional()
  @IsString()
  @MaxLength(256)
  lock_id?: string;
}

export class PageQuery {
  @PageLimit()
  limit?: number;

  @PageCursor(MaxLength(2048))
  cursor?: string;
}

export class ListUnitsQuery extends PageQuery {
  @ApiPropertyOptional({ example: 'team-a/', description: 'Only names starting with this' })
  @IsOptional()
  @IsString()
  @UnitNameLength()
  @Matches(/^[A-Za-z0-9._/-]*$/, { message: 'prefix may only contain letters, digits and . _ - /' })
  prefix?: string;
}

export class ListVersionsQuery extends PageQuery {
  @ApiPropertyOptional({ example: 'default' })
  @IsOptional()
  @IsString()
  workspace?: string;
}
