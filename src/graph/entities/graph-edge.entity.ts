import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';

/**
 * "producer feeds consumer": declared through the API, or discovered from a consumer's
 * `terraform_remote_state` data source. States are named, not referenced by id, so an edge
 * survives its producer being deleted (and then reads as `unknown`).
 */
@Entity({ name: 'graph_edges' })
@Index(
  'uq_graph_edges',
  ['consumerUnit', 'consumerWorkspace', 'source', 'name', 'producerUnit', 'producerWorkspace'],
  { unique: true },
)
@Index('ix_graph_edges_producer', ['producerUnit', 'producerWorkspace'])
export class GraphEdgeEntity {
  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: 'pk_graph_edges' })
  id!: string;

  @Column({ name: 'producer_unit', type: 'text', collation: 'C' })
  producerUnit!: string;

  @Column({ name: 'producer_workspace', type: 'text', collation: 'C' })
  producerWorkspace!: string;

  @Column({ name: 'consumer_unit', type: 'text', collation: 'C' })
  consumerUnit!: string;

  @Column({ name: 'consumer_workspace', type: 'text', collation: 'C' })
  consumerWorkspace!: string;

  /** `declared` or `discovered`. */
  @Column({ type: 'text' })
  source!: string;

  /** The data source name (discovered) or a label (declared). */
  @Column({ type: 'text' })
  name!: string;

  /** Declared edges: the producer outputs that matter (null: all). */
  @Column({ type: 'text', array: true, nullable: true })
  outputs!: string[] | null;

  /** Declared edges: as which input of the consumer. */
  @Column({ type: 'text', nullable: true })
  input!: string | null;

  /** Digests of the producer's outputs as the consumer last read them. */
  @Column({ type: 'jsonb', default: () => "'{}'" })
  recorded!: Record<string, string>;

  /**
   * The edge's author (the consumer's writer, or the declarer) may not read the producer's
   * sensitive outputs: they are left out of every comparison of this edge.
   */
  @Column({ name: 'sensitive_excluded', type: 'boolean', default: false })
  sensitiveExcluded!: boolean;

  /** The producer's version whose outputs those were (null when no kept version matches). */
  @Column({ name: 'producer_version', type: 'integer', nullable: true })
  producerVersion!: number | null;

  @Column({ name: 'recorded_at', type: 'timestamptz', default: () => 'now()' })
  recordedAt!: Date;

  @Column({ name: 'created_by', type: 'text' })
  createdBy!: string;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;
}
