import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { sqlRows } from '../database/sql';

export interface TfeWorkspaceRow {
  unit_id: string;
  tag_names: string[];
  project_id: string | null;
  terraform_version: string | null;
  updated_at: Date;
}

export interface TfeProjectRow {
  id: string;
  organization: string;
  name: string;
  created_at: Date;
  created_by: string;
}

export interface TfeUploadRow {
  id: string;
  unit_id: string;
  serial: string;
  lineage: string | null;
  md5: string;
  lock_id: string;
  principal: Record<string, unknown>;
  capability_sha256: string;
  created_at: Date;
  expires_at: Date;
  version: number | null;
}

/** SQL for the TFE door's own tables: workspace attributes, projects, announced uploads. */
@Injectable()
export class TfeRepository {
  constructor(private readonly db: DataSource) {}

  async attributesOf(unitIds: readonly string[]): Promise<Map<string, TfeWorkspaceRow>> {
    if (unitIds.length === 0) return new Map();
    const rows = await sqlRows<TfeWorkspaceRow>(
      this.db.manager,
      'SELECT * FROM tfe_workspaces WHERE unit_id = ANY($1::uuid[])',
      [unitIds],
    );
    return new Map(rows.map((r) => [r.unit_id, r]));
  }

  /** Sets what `patch` names, in one statement (the row is made on first change). */
  async updateAttributes(
    unitId: string,
    patch: { tagNames?: string[]; projectId?: string | null; terraformVersion?: string | null },
  ): Promise<TfeWorkspaceRow> {
    const rows = await sqlRows<TfeWorkspaceRow>(
      this.db.manager,
      `INSERT INTO tfe_workspaces (unit_id, tag_names, project_id, terraform_version)
       VALUES ($1, COALESCE($2::text[], '{}'), $4, $6)
       ON CONFLICT (unit_id) DO UPDATE SET
         tag_names = COALESCE($2::text[], tfe_workspaces.tag_names),
         project_id = CASE WHEN $3 THEN $4 ELSE tfe_workspaces.project_id END,
         terraform_version = CASE WHEN $5 THEN $6 ELSE tfe_workspaces.terraform_version END,
         updated_at = now()
       RETURNING *`,
      [
        unitId,
        patch.tagNames ?? null,
        patch.projectId !== undefined,
        patch.projectId ?? null,
        patch.terraformVersion !== undefined,
        patch.terraformVersion ?? null,
      ],
    );
    return rows[0];
  }

  async listProjects(organization: string): Promise<TfeProjectRow[]> {
    return sqlRows<TfeProjectRow>(
      this.db.manager,
      'SELECT * FROM tfe_projects WHERE organization = $1 ORDER BY name',
      [organization],
    );
  }

  async findProject(id: string): Promise<TfeProjectRow | undefined> {
    const rows = await sqlRows<TfeProjectRow>(
      this.db.manager,
      'SELECT * FROM tfe_projects WHERE id = $1',
      [id],
    );
    return rows[0];
  }

  /** Creates the project, or answers the one of that name already there (`created` false). */
  async createProject(
    id: string,
    organization: string,
    name: string,
    by: string,
  ): Promise<{ row: TfeProjectRow; created: boolean }> {
    const inserted = await sqlRows<TfeProjectRow>(
      this.db.manager,
      `INSERT INTO tfe_projects (id, organization, name, created_by) VALUES ($1, $2, $3, $4)
       ON CONFLICT (organization, name) DO NOTHING RETURNING *`,
      [id, organization, name, by],
    );
    if (inserted[0]) return { row: inserted[0], created: true };
    const rows = await sqlRows<TfeProjectRow>(
      this.db.manager,
      'SELECT * FROM tfe_projects WHERE organization = $1 AND name = $2',
      [organization, name],
    );
    return { row: rows[0], created: false };
  }

  async insertUpload(row: Omit<TfeUploadRow, 'created_at' | 'version'>): Promise<void> {
    await sqlRows(
      this.db.manager,
      `INSERT INTO tfe_state_uploads
         (id, unit_id, serial, lineage, md5, lock_id, principal, capability_sha256, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9)`,
      [
        row.id,
        row.unit_id,
        row.serial,
        row.lineage,
        row.md5,
        row.lock_id,
        JSON.stringify(row.principal),
        row.capability_sha256,
        row.expires_at,
      ],
    );
  }

  async findUpload(id: string): Promise<TfeUploadRow | undefined> {
    const rows = await sqlRows<TfeUploadRow>(
      this.db.manager,
      'SELECT * FROM tfe_state_uploads WHERE id = $1',
      [id],
    );
    return rows[0];
  }

  async finishUpload(id: string, version: number): Promise<void> {
    await sqlRows(this.db.manager, 'UPDATE tfe_state_uploads SET version = $2 WHERE id = $1', [
      id,
      version,
    ]);
  }

  /** Forgets announced uploads a day after they expired (finished or not). */
  async sweepUploads(): Promise<void> {
    await sqlRows(
      this.db.manager,
      `DELETE FROM tfe_state_uploads WHERE expires_at < now() - interval '1 day'`,
    );
  }
}
