import { Column, Entity, JoinColumn, OneToOne, PrimaryColumn } from 'typeorm';
import { StateEntity } from '../../entities/state.entity';

/**
 * A held lock. The primary key is the state, so "insert if absent" is the whole acquire:
 * two callers, on any number of replicas, can never both insert.
 */
@Entity({ name: 'locks' })
export class LockEntity {
  @PrimaryColumn({ name: 'state_id', type: 'uuid', primaryKeyConstraintName: 'pk_locks' })
  stateId!: string;

  @OneToOne(() => StateEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'state_id', foreignKeyConstraintName: 'fk_locks_state' })
  state?: StateEntity;

  @Column({ name: 'lock_id', type: 'text' })
  lockId!: string;

  /** Terraform's LockInfo JSON exactly as sent. */
  @Column({ type: 'text' })
  info!: string;

  @Column({ type: 'text' })
  principal!: string;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;
}
