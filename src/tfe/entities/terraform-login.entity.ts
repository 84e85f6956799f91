import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * A `terraform login` in flight: an authorization request sent on to the OpenID provider
 * (stage `authorize`), then the single-use code handed to Terraform's loopback listener (stage
 * `code`). The row is named by the SHA-256 of its secret (the state sent to the provider, or
 * the code) and deleted when it is used.
 */
@Entity({ name: 'terraform_logins' })
@Index('ix_terraform_logins_expires', ['expiresAt'])
export class TerraformLoginEntity {
  @PrimaryColumn({
    name: 'key_sha256',
    type: 'char',
    length: 64,
    primaryKeyConstraintName: 'pk_terraform_logins',
  })
  keySha256!: string;

  @Column({ type: 'text' })
  stage!: string;

  @Column({ type: 'jsonb' })
  data!: Record<string, unknown>;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;

  @Column({ name: 'expires_at', type: 'timestamptz' })
  expiresAt!: Date;
}
