import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * Ed25519 keys that sign access tokens, shared by every replica. The newest unretired
 * generated key signs (unless a key file is configured); retired keys still verify until the
 * tokens they signed have expired.
 */
@Entity({ name: 'signing_keys' })
export class SigningKeyEntity {
  @PrimaryColumn({ type: 'text', primaryKeyConstraintName: 'pk_signing_keys' })
  kid!: string;

  /** PKCS#8 PEM; null for a key kept only to verify (its private half lives in a file). */
  @Column({ name: 'private_pem', type: 'text', nullable: true })
  privatePem!: string | null;

  @Column({ name: 'public_jwk', type: 'jsonb' })
  publicJwk!: Record<string, unknown>;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;

  @Column({ name: 'retired_at', type: 'timestamptz', nullable: true })
  retiredAt!: Date | null;
}
