import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * A revoked parent credential (an API token, a login session) whose derived credentials —
 * access tokens, S3 session tokens, stateless and signed — may still be unexpired. Checked on
 * every use of a derived credential; a row can go once the longest-lived credential derived
 * from that parent could no longer verify (`keep_until`).
 */
@Entity({ name: 'credential_revocations' })
export class CredentialRevocationEntity {
  /** `api_token` or `refresh_family`. */
  @PrimaryColumn({
    name: 'parent_kind',
    type: 'text',
    primaryKeyConstraintName: 'pk_credential_revocations',
  })
  parentKind!: string;

  @PrimaryColumn({
    name: 'parent_id',
    type: 'uuid',
    primaryKeyConstraintName: 'pk_credential_revocations',
  })
  parentId!: string;

  @Column({ name: 'revoked_at', type: 'timestamptz', default: () => 'now()' })
  revokedAt!: Date;

  @Column({ name: 'keep_until', type: 'timestamptz' })
  keepUntil!: Date;
}
