import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * What a person's most recent OpenID login said about them: their verified email and groups.
 * API tokens acting as that person carry these (not what was true when the token was made)
 * until `expires_at` — one refresh-token lifetime after that login — unless a newer login
 * renews them. Logging out does not remove the row.
 */
@Entity({ name: 'login_identities' })
export class LoginIdentityEntity {
  @PrimaryColumn({ type: 'text', primaryKeyConstraintName: 'pk_login_identities' })
  subject!: string;

  @Column({ type: 'text', nullable: true })
  email!: string | null;

  @Column({ type: 'jsonb', default: () => "'[]'" })
  groups!: string[];

  @Column({ name: 'logged_in_at', type: 'timestamptz', default: () => 'now()' })
  loggedInAt!: Date;

  @Column({ name: 'expires_at', type: 'timestamptz' })
  expiresAt!: Date;
}
