import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/** A project of an organization, as Terraform's `cloud { project = … }` creates it. */
@Entity({ name: 'tfe_projects' })
@Index('uq_tfe_projects_name', ['organization', 'name'], { unique: true })
export class TfeProjectEntity {
  @PrimaryColumn({ type: 'text', primaryKeyConstraintName: 'pk_tfe_projects' })
  id!: string;

  /** Who made it (the principal's subject) and when. */
  @Column({ name: 'created_by', type: 'text' })
  createdBy!: string;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;

  @Column({ type: 'text', collation: 'C' })
  organization!: string;

  @Column({ type: 'text', collation: 'C' })
  name!: string;
}
