import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { UnitEntity } from '../../state/entities/unit.entity';

/**
 * A state version Terraform announced (`POST workspaces/:id/state-versions`) and uploads next,
 * without credentials, to the capability URL it was given. The row holds what the create
 * checked and who made it; the upload is written as that principal, under that lock.
 */
@Entity({ name: 'tfe_state_uploads' })
@Index('ix_tfe_state_uploads_expires', ['expiresAt'])
export class TfeStateUploadEntity {
  @PrimaryColumn({ type: 'text', primaryKeyConstraintName: 'pk_tfe_state_uploads' })
  id!: string;

  @Column({ name: 'unit_id', type: 'uuid' })
  unitId!: string;

  @ManyToOne(() => UnitEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'unit_id', foreignKeyConstraintName: 'fk_tfe_state_uploads_unit' })
  unit?: UnitEntity;

  @Column({ type: 'bigint' })
  serial!: string;

  @Column({ type: 'text', nullable: true })
  lineage!: string | null;

  @Column({ type: 'char', length: 32 })
  md5!: string;

  /** The lock the creator held; the upload is written under it. */
  @Column({ name: 'lock_id', type: 'text' })
  lockId!: string;

  /** The creator (subject, groups, credential parent): re-checked against revocations. */
  @Column({ type: 'jsonb' })
  principal!: Record<string, unknown>;

  /** SHA-256 of the upload URLs' secret. */
  @Column({ name: 'capability_sha256', type: 'char', length: 64 })
  capabilitySha256!: string;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;

  @Column({ name: 'expires_at', type: 'timestamptz' })
  expiresAt!: Date;

  /** The version number the upload became (null until then). */
  @Column({ type: 'integer', nullable: true })
  version!: number | null;
}
