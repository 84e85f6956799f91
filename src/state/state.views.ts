import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import type { ServedVersionRow, StateSummaryRow, UnitRow } from './state.repository';

export type { Door } from '../common/request-context';

export class VersionView {
  @ApiProperty({ description: 'Per-state version number (1, 2, 3 …), not Terraform’s serial' })
  version!: number;
  @ApiPropertyOptional({
    type: Number,
    nullable: true,
    description: 'Terraform serial (null when encrypted)',
  })
  serial!: number | null;
  @ApiPropertyOptional({ type: String, nullable: true })
  lineage!: string | null;
  @ApiPropertyOptional({ type: String, nullable: true })
  terraformVersion!: string | null;
  @ApiProperty({ description: 'OpenTofu client-side-encrypted state, stored opaque' })
  encrypted!: boolean;
  @ApiProperty()
  sha256!: string;
  @ApiProperty()
  md5!: string;
  @ApiProperty({ description: 'bytes' })
  size!: number;
  @ApiProperty()
  createdAt!: string;
  @ApiProperty()
  createdBy!: string;
  @ApiProperty({ enum: ['http', 's3', 'api', 'tfe'] })
  door!: string;
  @ApiPropertyOptional({
    type: Number,
    nullable: true,
    description: 'For a restore: the version it copies',
  })
  restoredFrom!: number | null;
}

export function versionView(row: ServedVersionRow): VersionView {
  return {
    version: row.version,
    serial: row.serial === null ? null : Number(row.serial),
    lineage: row.lineage,
    terraformVersion: row.terraform_version,
    encrypted: row.encrypted,
    sha256: row.sha256,
    md5: row.md5,
    size: Number(row.size),
    createdAt: new Date(row.created_at).toISOString(),
    createdBy: row.created_by,
    door: row.door,
    restoredFrom: row.restored_from,
  };
}

export class UnitView {
  @ApiProperty({ example: 'team-a/network/prod' })
  name!: string;
  @ApiProperty()
  createdAt!: string;
  @ApiProperty()
  createdBy!: string;
  @ApiPropertyOptional({ type: String, nullable: true, description: 'Set when soft-deleted' })
  deletedAt!: string | null;
}

export function unitView(row: UnitRow): UnitView {
  return {
    name: row.name,
    createdAt: new Date(row.created_at).toISOString(),
    createdBy: row.created_by,
    deletedAt: row.deleted_at ? new Date(row.deleted_at).toISOString() : null,
  };
}

export class WorkspaceView {
  @ApiProperty({ example: 'default' })
  workspace!: string;
  @ApiPropertyOptional({ type: Number, nullable: true, description: 'Current version number' })
  currentVersion!: number | null;
  @ApiPropertyOptional({ type: Number, nullable: true })
  serial!: number | null;
  @ApiPropertyOptional({ type: Number, nullable: true })
  size!: number | null;
  @ApiPropertyOptional({ type: String, nullable: true })
  updatedAt!: string | null;
  @ApiProperty({ description: 'The state was deleted (soft); its versions remain' })
  deleted!: boolean;
  @ApiProperty()
  locked!: boolean;
}

export function workspaceView(row: StateSummaryRow): WorkspaceView {
  const live = row.deleted_at === null;
  return {
    workspace: row.workspace,
    currentVersion: live ? row.current_version : null,
    serial: live && row.current_serial !== null ? Number(row.current_serial) : null,
    size: live && row.current_size !== null ? Number(row.current_size) : null,
    updatedAt:
      live && row.current_created_at ? new Date(row.current_created_at).toISOString() : null,
    deleted: !live,
    locked: row.lock_id !== null,
  };
}

export class UnitDetailView extends UnitView {
  @ApiProperty({ type: [WorkspaceView] })
  workspaces!: WorkspaceView[];
}

export class UnitPageView {
  @ApiProperty({ type: [UnitView] })
  items!: UnitView[];
  @ApiPropertyOptional({
    type: String,
    nullable: true,
    description: 'Pass as `cursor` for the next page',
  })
  nextCursor!: string | null;
}

export class VersionPageView {
  @ApiProperty({ type: [VersionView] })
  items!: VersionView[];
  @ApiPropertyOptional({ type: String, nullable: true })
  nextCursor!: string | null;
}

export class WriteResultView {
  @ApiProperty({ description: 'False when the body equals the current version byte for byte' })
  created!: boolean;
  @ApiProperty({ type: VersionView })
  version!: VersionView;
}

export class OutputsView {
  @ApiProperty()
  version!: number;
  @ApiPropertyOptional({ type: Number, nullable: true })
  serial!: number | null;
  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    description: 'Terraform outputs: {name: {value, type, sensitive}}',
  })
  outputs!: Record<string, unknown>;
}
