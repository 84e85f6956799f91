import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';

/**
 * One refresh token of a login session ("family"). Only the sha256 of the token is stored.
 * Each use consumes the token and issues the next one in the family; presenting a consumed
 * token revokes the family (someone else has a copy).
 */
@Entity({ name: 'refresh_tokens' })
export class RefreshTokenEntity {
  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: 'pk_refresh_tokens' })
  id!: string;

  @Index('ix_refresh_tokens_family')
  @Column({ name: 'family_id', type: 'uuid' })
  familyId!: string;

  @Index('uq_refresh_tokens_hash', { unique: true })
  @Column({ name: 'token_hash', type: 'char', length: 64 })
  tokenHash!: string;

  @Column({ type: 'text' })
  subject!: string;

  @Column({ type: 'text', nullable: true })
  email!: string | null;

  @Column({ type: 'jsonb', default: () => "'[]'" })
  groups!: string[];

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;

  /** Absolute end of the login session, whatever the rotations. */
  @Column({ name: 'family_expires_at', type: 'timestamptz' })
  familyExpiresAt!: Date;

  @Column({ name: 'used_at', type: 'timestamptz', nullable: true })
  usedAt!: Date | null;

  @Column({ name: 'revoked_at', type: 'timestamptz', nullable: true })
  revokedAt!: Date | null;
}
