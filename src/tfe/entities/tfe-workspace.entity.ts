import { Column, Entity, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { UnitEntity } from '../../state/entities/unit.entity';

/**
 * What the TFE door keeps about a unit it serves as a workspace (organization `acme`, workspace
 * `network` = unit `acme/network`): its tags, its project and the Terraform version a client set.
 * One row per unit, made on first change, gone with the unit when it is purged.
 */
@Entity({ name: 'tfe_workspaces' })
export class TfeWorkspaceEntity {
  @PrimaryColumn({ name: 'unit_id', type: 'uuid', primaryKeyConstraintName: 'pk_tfe_workspaces' })
  unitId!: string;

  @ManyToOne(() => UnitEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'unit_id', foreignKeyConstraintName: 'fk_tfe_workspaces_unit' })
  unit?: UnitEntity;

  /** Key-only tags (`tag-names`), sorted, each a valid tag name. */
  @Column({ name: 'tag_names', type: 'text', array: true, default: () => "'{}'" })
  tagNames!: string[];

  /** A `tfe_projects` id, or null for the organization's default project. */
  @Column({ name: 'project_id', type: 'text', nullable: true })
  projectId!: string | null;

  /** As the client sent it (Terraform's or OpenTofu's version string, or `latest`). */
  @Column({ name: 'terraform_version', type: 'text', nullable: true })
  terraformVersion!: string | null;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt!: Date;
}
