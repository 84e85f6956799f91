import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { DataSource, EntityManager } from 'typeorm';
import { sqlRows } from '../database/sql';
import type { NodeRef } from './graph-model';
import { transaction, TransactionWork } from '../database/transaction';

export interface EdgeRow {
  id: string;
  producer_unit: string;
  producer_workspace: string;
  consumer_unit: string;
  consumer_workspace: string;
  source: 'declared' | 'discovered';
  name: string;
  outputs: string[] | null;
  input: string | null;
  recorded: Record<string, string>;
  producer_version: number | null;
  sensitive_excluded: boolean;
  recorded_at: Date;
  created_by: string;
  created_at: Date;
}

/** A discovered edge as a consumer's write records it. */
export interface DiscoveredEdge {
  producer: NodeRef;
  name: string;
  recorded: Record<string, string>;
  /** `outputSetDigest(recorded)`: finds the producer version read by an index lookup. */
  setDigest: string;
  /** The writer may not read the producer's sensitive outputs (they are not in `recorded`). */
  sensitiveExcluded: boolean;
}

const EDGE_COLUMNS = `e.id, e.producer_unit, e.producer_workspace, e.consumer_unit, e.consumer_workspace,
  e.source, e.name, e.outputs, e.input, e.recorded, e.producer_version, e.sensitive_excluded,
  e.recorded_at, e.created_by, e.created_at`;

/**
 * Every listing of edges in one total order (the columns of the unique index), so an answer
 * never depends on how rows happen to lie in the table (after a restore, a VACUUM FULL, a plan
 * change).
 */
const EDGE_ORDER = `e.consumer_unit, e.consumer_workspace, e.producer_unit, e.producer_workspace,
  e.name, e.source`;

/**
 * SQL for the dependency graph. Methods that take an `EntityManager` run inside the caller's
 * transaction (a consumer's write): on the embedded database nothing else may query then.
 *
 * This repository writes `graph_edges` and nothing else. What the graph reads of units, states
 * and versions (the state module's tables) it asks `StateRepository`'s read-only queries
 * (`unitExists`, `currentOutputs`, `firstChangedVersions`). Three statements here still read
 * those tables themselves, each marked "Joins the state module's tables": each writes edges
 * with the producer version it reads, in one statement (one snapshot, one round trip); a read
 * through `StateRepository` and then a write here would be two.
 */
@Injectable()
export class GraphRepository {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  get manager(): EntityManager {
    return this.db.manager;
  }

  /** A transaction on the database kernel (retried on deadlock; see `transaction`). */
  transaction<T>(work: TransactionWork<T>): Promise<T> {
    return transaction(this.db, work);
  }

  /**
   * Replaces the consumer's discovered edges with `edges` (kept rows keep their id and
   * creation time), and refreshes what its declared edges recorded to its producers' current
   * outputs: a consumer that was just applied has read them. A declared edge compares the
   * producer's sensitive outputs only when the writer may read them (`sensitiveReadable`; an
   * edge declared since the writer's rights were looked at is judged without them);
   * `undefined` when the consumer had no declared edges (nothing to refresh).
   *
   * Cost: a few index lookups per edge written, whatever the producers' history (the
   * producer version read is found by its output-set digest, not by comparing versions).
   */
  async recordConsumerWrite(
    m: EntityManager,
    consumer: NodeRef,
    edges: DiscoveredEdge[] | undefined,
    sensitiveReadable: NodeRef[] | undefined,
    subject: string,
  ): Promise<void> {
    if (edges !== undefined) await this.replaceDiscovered(m, consumer, edges, subject);
    if (sensitiveReadable === undefined) return; // no declared edges to bring up to date
    // Joins the state module's tables (read only): the declared edges take their producers'
    // current versions in the same statement (see the class comment).
    await m.query(
      `UPDATE graph_edges e
          SET recorded = coalesce(cur.output_digests, '{}'::jsonb), producer_version = cur.version,
              sensitive_excluded = NOT EXISTS (
                SELECT 1 FROM unnest($3::text[], $4::text[]) AS r(unit, workspace)
                 WHERE r.unit = e.producer_unit AND r.workspace = e.producer_workspace),
              recorded_at = now()
         FROM (SELECT g.id, v.output_digests, v.version
                 FROM graph_edges g
                 LEFT JOIN units u ON u.name = g.producer_unit AND u.deleted_at IS NULL
                 LEFT JOIN states s ON s.unit_id = u.id AND s.workspace = g.producer_workspace
                                   AND s.deleted_at IS NULL
                 LEFT JOIN versions v ON v.id = s.current_version_id
                WHERE g.consumer_unit = $1 AND g.consumer_workspace = $2 AND g.source = 'declared') cur
        WHERE e.id = cur.id`,
      [
        consumer.unit,
        consumer.workspace,
        sensitiveReadable.map((n) => n.unit),
        sensitiveReadable.map((n) => n.workspace),
      ],
    );
  }

  /** The producers of a consumer's declared edges. */
  async declaredProducers(consumer: NodeRef): Promise<NodeRef[]> {
    return sqlRows<NodeRef>(
      this.db.manager,
      `SELECT DISTINCT producer_unit AS unit, producer_workspace AS workspace FROM graph_edges
        WHERE consumer_unit = $1 AND consumer_workspace = $2 AND source = 'declared'`,
      [consumer.unit, consumer.workspace],
    );
  }

  private async replaceDiscovered(
    m: EntityManager,
    consumer: NodeRef,
    edges: DiscoveredEdge[],
    subject: string,
  ): Promise<void> {
    // One statement for all of them (a state may read a thousand others), then one delete.
    // The producer version read: the newest whose output-set digest (all outputs, or the
    // non-sensitive ones a reader without `outputs.read-sensitive` is served) is the one of what
    // was recorded — two index lookups per edge (ix_versions_output_set,
    // ix_versions_public_output_set), not a comparison with every version of the producer.
    // An edge that leaves sensitive outputs out matches the non-sensitive set only.
    // Joins the state module's tables (read only): the version lookup is part of the insert
    // (see the class comment).
    const kept =
      edges.length === 0
        ? []
        : await sqlRows<{ id: string }>(
            m,
            `INSERT INTO graph_edges AS g (producer_unit, producer_workspace, consumer_unit,
                                           consumer_workspace, source, name, recorded,
                                           producer_version, sensitive_excluded, created_by)
             SELECT x.unit, x.workspace, $2, $3, 'discovered', x.name, x.recorded,
                    (SELECT greatest(
                              (SELECT v.version FROM versions v
                                WHERE v.state_id = s.id AND v.public_output_set_digest = x.set
                                ORDER BY v.version DESC LIMIT 1),
                              CASE WHEN NOT x.excluded THEN
                                (SELECT v.version FROM versions v
                                  WHERE v.state_id = s.id AND v.output_set_digest = x.set
                                  ORDER BY v.version DESC LIMIT 1)
                              END)
                       FROM units u
                       JOIN states s ON s.unit_id = u.id AND s.workspace = x.workspace
                      WHERE u.name = x.unit AND u.deleted_at IS NULL),
                    x.excluded, $4
               FROM jsonb_to_recordset($1::jsonb)
                    AS x(unit text, workspace text, name text, recorded jsonb, set text,
                         excluded boolean)
             ON CONFLICT (consumer_unit, consumer_workspace, source, name, producer_unit, producer_workspace)
             DO UPDATE SET recorded = EXCLUDED.recorded, producer_version = EXCLUDED.producer_version,
                           sensitive_excluded = EXCLUDED.sensitive_excluded, recorded_at = now()
             RETURNING id`,
            [
              JSON.stringify(
                edges.map((e) => ({
                  unit: e.producer.unit,
                  workspace: e.producer.workspace,
                  name: e.name,
                  recorded: e.recorded,
                  set: e.setDigest,
                  excluded: e.sensitiveExcluded,
                })),
              ),
              consumer.unit,
              consumer.workspace,
              subject,
            ],
          );
    await m.query(
      `DELETE FROM graph_edges
        WHERE consumer_unit = $1 AND consumer_workspace = $2 AND source = 'discovered'
          AND NOT (id = ANY($3::uuid[]))`,
      [consumer.unit, consumer.workspace, kept.map((r) => r.id)],
    );
  }

  async insertDeclared(
    m: EntityManager,
    e: {
      producer: NodeRef;
      consumer: NodeRef;
      name: string;
      outputs: string[] | null;
      input: string | null;
      sensitiveExcluded: boolean;
      createdBy: string;
    },
  ): Promise<EdgeRow | undefined> {
    // Joins the state module's tables (read only): the new edge records its producer's current
    // version in the same statement (see the class comment).
    const rows = await sqlRows<EdgeRow>(
      m,
      `INSERT INTO graph_edges (producer_unit, producer_workspace, consumer_unit, consumer_workspace,
                                source, name, outputs, input, recorded, producer_version,
                                sensitive_excluded, created_by)
       SELECT $1, $2, $3, $4, 'declared', $5, $6, $7,
              coalesce(v.output_digests, '{}'::jsonb), v.version, $9, $8
         FROM (SELECT 1) one
         LEFT JOIN units u ON u.name = $1 AND u.deleted_at IS NULL
         LEFT JOIN states s ON s.unit_id = u.id AND s.workspace = $2 AND s.deleted_at IS NULL
         LEFT JOIN versions v ON v.id = s.current_version_id
       ON CONFLICT (consumer_unit, consumer_workspace, source, name, producer_unit, producer_workspace)
       DO NOTHING
       RETURNING *`,
      [
        e.producer.unit,
        e.producer.workspace,
        e.consumer.unit,
        e.consumer.workspace,
        e.name,
        e.outputs,
        e.input,
        e.createdBy,
        e.sensitiveExcluded,
      ],
    );
    return rows[0];
  }

  async findEdge(id: string): Promise<EdgeRow | undefined> {
    return (
      await sqlRows<EdgeRow>(
        this.db.manager,
        `SELECT ${EDGE_COLUMNS} FROM graph_edges e WHERE e.id = $1`,
        [id],
      )
    )[0];
  }

  /**
   * A purged consumer reads nothing any more: its edges go with it (edges *from* it stay, and
   * read as `unknown`). Runs inside the purge's transaction.
   */
  async forgetConsumer(m: EntityManager, unit: string, workspace?: string): Promise<void> {
    await m.query(
      `DELETE FROM graph_edges WHERE consumer_unit = $1 AND ($2::text IS NULL OR consumer_workspace = $2)`,
      [unit, workspace ?? null],
    );
  }

  async deleteEdge(m: EntityManager, id: string): Promise<boolean> {
    const rows = await sqlRows<{ id: string }>(
      m,
      'DELETE FROM graph_edges WHERE id = $1 RETURNING id',
      [id],
    );
    return rows.length > 0;
  }

  /** Every edge with an end whose unit name starts with `prefix` ('' for all). */
  async edges(prefix: string): Promise<EdgeRow[]> {
    return sqlRows<EdgeRow>(
      this.db.manager,
      prefix === ''
        ? `SELECT ${EDGE_COLUMNS} FROM graph_edges e ORDER BY ${EDGE_ORDER}`
        : `SELECT ${EDGE_COLUMNS} FROM graph_edges e
            WHERE left(e.producer_unit, length($1)) = $1 OR left(e.consumer_unit, length($1)) = $1
            ORDER BY ${EDGE_ORDER}`,
      prefix === '' ? [] : [prefix],
    );
  }

  /** The edges into `node` and into everything upstream of it (cycles end the walk). */
  async upstreamEdges(node: NodeRef): Promise<EdgeRow[]> {
    return sqlRows<EdgeRow>(
      this.db.manager,
      `WITH RECURSIVE up(unit, workspace) AS (
         SELECT $1::text COLLATE "C", $2::text COLLATE "C"
         UNION
         SELECT g.producer_unit, g.producer_workspace
           FROM graph_edges g JOIN up ON g.consumer_unit = up.unit AND g.consumer_workspace = up.workspace
       )
       SELECT ${EDGE_COLUMNS} FROM graph_edges e
         JOIN up ON e.consumer_unit = up.unit AND e.consumer_workspace = up.workspace
        ORDER BY ${EDGE_ORDER}`,
      [node.unit, node.workspace],
    );
  }
}
