import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';

/** One Terraform state address (`team-a/network/prod`); its workspaces are `StateEntity` rows. */
@Entity({ name: 'units' })
export class UnitEntity {
  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: 'pk_units' })
  id!: string;

  /** Unique for the unit's whole life, soft-deleted or not, until it is purged. */
  @Index('uq_units_name', { unique: true })
  @Column({ type: 'text', collation: 'C' })
  name!: string;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;

  @Column({ name: 'created_by', type: 'text' })
  createdBy!: string;

  /** Set by a soft delete; versions stay listed and restorable until a purge. */
  @Column({ name: 'deleted_at', type: 'timestamptz', nullable: true })
  deletedAt!: Date | null;

  @Column({ name: 'deleted_by', type: 'text', nullable: true })
  deletedBy!: string | null;
}
