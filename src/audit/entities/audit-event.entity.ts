import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';

/** Append-only record of a security-relevant event. Never secrets or state content. */
@Entity({ name: 'audit_events' })
@Index('ix_audit_events_actor_at', ['actor', 'at'])
@Index('ix_audit_events_unit_at', ['unit', 'at'])
export class AuditEventEntity {
  @PrimaryGeneratedColumn('increment', {
    type: 'bigint',
    primaryKeyConstraintName: 'pk_audit_events',
  })
  id!: string;

  @Index('ix_audit_events_at')
  @Column({ type: 'timestamptz', default: () => 'now()' })
  at!: Date;

  @Column({ type: 'text' })
  type!: string;

  /** Principal subject, or `anonymous`. */
  @Column({ type: 'text' })
  actor!: string;

  /** The RBAC action concerned, when there is one. */
  @Column({ type: 'text', nullable: true })
  action!: string | null;

  @Column({ type: 'text', nullable: true })
  unit!: string | null;

  @Column({ type: 'text', nullable: true })
  workspace!: string | null;

  /** success | denied | failure */
  @Column({ type: 'text' })
  outcome!: string;

  @Column({ type: 'text', nullable: true })
  door!: string | null;

  @Column({ name: 'request_id', type: 'text', nullable: true })
  requestId!: string | null;

  @Column({ name: 'client_ip', type: 'text', nullable: true })
  clientIp!: string | null;

  @Column({ type: 'jsonb', nullable: true })
  details!: Record<string, unknown> | null;

  /** How many identical events this row stands for (aggregated unauthenticated failures). */
  @Column({ type: 'integer', default: 1 })
  count!: number;
}
