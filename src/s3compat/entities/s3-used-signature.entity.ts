import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * A signed S3 write (PUT, POST, DELETE) that was accepted: the SHA-256 of its signature, kept
 * until the request could no longer verify. The primary key is what refuses a replay, on every
 * replica at once.
 */
@Entity({ name: 's3_used_signatures' })
export class S3UsedSignatureEntity {
  @PrimaryColumn({
    name: 'signature_sha256',
    type: 'character',
    length: 64,
    primaryKeyConstraintName: 'pk_s3_used_signatures',
  })
  signatureSha256!: string;

  @Index('ix_s3_used_signatures_expires_at')
  @Column({ name: 'expires_at', type: 'timestamptz' })
  expiresAt!: Date;
}
