import { Column, Entity, PrimaryColumn } from 'typeorm';

/** Small server-wide values every replica must agree on (the generated bootstrap token's hash, …). */
@Entity({ name: 'settings' })
export class SettingEntity {
  @PrimaryColumn({ type: 'text', primaryKeyConstraintName: 'pk_settings' })
  key!: string;

  @Column({ type: 'text' })
  value!: string;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt!: Date;
}
