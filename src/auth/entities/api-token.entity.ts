import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';

/** A long-lived token for machines; only its sha256 is stored. */
@Entity({ name: 'api_tokens' })
export class ApiTokenEntity {
  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: 'pk_api_tokens' })
  id!: string;

  @Column({ type: 'text' })
  name!: string;

  @Index('uq_api_tokens_hash', { unique: true })
  @Column({ name: 'token_hash', type: 'char', length: 64 })
  tokenHash!: string;

  /**
   * The principal the token acts as: its creator, or a service principal `svc:<name>`. A token
   * acting as a person carries the groups and email of that person's latest login
   * (`login_identities`), never ones of its own.
   */
  @Index('ix_api_tokens_subject')
  @Column({ type: 'text' })
  subject!: string;

  @Column({ name: 'created_by', type: 'text' })
  createdBy!: string;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;

  @Column({ name: 'expires_at', type: 'timestamptz', nullable: true })
  expiresAt!: Date | null;

  @Column({ name: 'last_used_at', type: 'timestamptz', nullable: true })
  lastUsedAt!: Date | null;

  @Column({ name: 'revoked_at', type: 'timestamptz', nullable: true })
  revokedAt!: Date | null;
}
