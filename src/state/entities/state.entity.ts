import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryGeneratedColumn } from 'typeorm';
import { UnitEntity } from './unit.entity';
import { VersionEntity } from './version.entity';

/** A (unit, workspace) pair: the thing Terraform reads, writes and locks. */
@Entity({ name: 'states' })
@Index('uq_states_unit_workspace', ['unitId', 'workspace'], { unique: true })
export class StateEntity {
  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: 'pk_states' })
  id!: string;

  @Column({ name: 'unit_id', type: 'uuid' })
  unitId!: string;

  @ManyToOne(() => UnitEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'unit_id', foreignKeyConstraintName: 'fk_states_unit' })
  unit?: UnitEntity;

  @Column({ type: 'text', collation: 'C' })
  workspace!: string;

  /** The current version; swapped in the same transaction that inserts a new version. */
  @Column({ name: 'current_version_id', type: 'uuid', nullable: true })
  currentVersionId!: string | null;

  @ManyToOne(() => VersionEntity, { onDelete: 'SET NULL' })
  @JoinColumn({ name: 'current_version_id', foreignKeyConstraintName: 'fk_states_current_version' })
  currentVersion?: VersionEntity;

  /** The number the next version of this state gets (1, 2, 3 …). */
  @Column({ name: 'next_version', type: 'integer', default: 1 })
  nextVersion!: number;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;

  /** Soft delete of this workspace's state: no current state is served while set. */
  @Column({ name: 'deleted_at', type: 'timestamptz', nullable: true })
  deletedAt!: Date | null;

  /** True when the delete came from deleting the whole unit (undeleting the unit brings it back). */
  @Column({ name: 'deleted_with_unit', type: 'boolean', default: false })
  deletedWithUnit!: boolean;

  /** The last lock released normally, so a retried release whose answer was lost succeeds. */
  @Column({ name: 'last_lock_id', type: 'text', nullable: true })
  lastLockId!: string | null;

  @Column({ name: 'last_lock_principal', type: 'text', nullable: true })
  lastLockPrincipal!: string | null;
}
