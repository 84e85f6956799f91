import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryGeneratedColumn } from 'typeorm';
import type { StateEntity } from './state.entity';

/** An immutable accepted write of one state. Never updated; removed only by retention or purge. */
@Entity({ name: 'versions' })
@Index('uq_versions_state_version', ['stateId', 'version'], { unique: true })
@Index('ix_versions_output_set', ['stateId', 'outputSetDigest', 'version'])
@Index('ix_versions_public_output_set', ['stateId', 'publicOutputSetDigest', 'version'])
export class VersionEntity {
  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: 'pk_versions' })
  id!: string;

  @Column({ name: 'state_id', type: 'uuid' })
  stateId!: string;

  @ManyToOne('StateEntity', { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'state_id', foreignKeyConstraintName: 'fk_versions_state' })
  state?: StateEntity;

  /** Per-state number (1, 2, 3 …), independent of Terraform's serial. */
  @Column({ type: 'integer' })
  version!: number;

  /** Terraform's serial and lineage; null for client-side-encrypted states. */
  @Column({ type: 'bigint', nullable: true })
  serial!: string | null;

  @Column({ type: 'text', nullable: true })
  lineage!: string | null;

  @Column({ name: 'terraform_version', type: 'text', nullable: true })
  terraformVersion!: string | null;

  @Column({ type: 'boolean', default: false })
  encrypted!: boolean;

  @Column({ type: 'char', length: 64 })
  sha256!: string;

  @Column({ type: 'char', length: 32 })
  md5!: string;

  @Column({ type: 'bigint' })
  size!: string;

  /** Shared by versions with the same bytes (restores); deleted when nothing refers to it. */
  @Index('ix_versions_blob_key')
  @Column({ name: 'blob_key', type: 'text' })
  blobKey!: string;

  /**
   * The state's top-level outputs (null for encrypted states). `json`, not `jsonb`: a value may
   * hold a NUL, which `jsonb` cannot store. Read back whole, never queried inside.
   */
  @Column({ type: 'json', nullable: true })
  outputs!: Record<string, unknown> | null;

  /** Keyed digests of each output value (the dependency graph compares them, never values). */
  @Column({ name: 'output_digests', type: 'jsonb', nullable: true })
  outputDigests!: Record<string, string> | null;

  /** Names of the outputs marked sensitive (left out for readers without `outputs.read-sensitive`). */
  @Column({ name: 'sensitive_outputs', type: 'text', array: true, nullable: true })
  sensitiveOutputs!: string[] | null;

  /**
   * One digest of all output digests, and of those of the non-sensitive outputs: "the newest
   * version whose outputs a consumer read" is then an index lookup, whatever the history.
   */
  @Column({ name: 'output_set_digest', type: 'text', nullable: true })
  outputSetDigest!: string | null;

  @Column({ name: 'public_output_set_digest', type: 'text', nullable: true })
  publicOutputSetDigest!: string | null;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;

  @Column({ name: 'created_by', type: 'text' })
  createdBy!: string;

  /** Which door the write came through: `http`, `s3`, `api`. */
  @Column({ type: 'text' })
  door!: string;

  /** For a restore: the version number whose content this one copies. */
  @Column({ name: 'restored_from', type: 'integer', nullable: true })
  restoredFrom!: number | null;
}
