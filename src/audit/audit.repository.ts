import type { Queryable } from '../database/sql';
import type { SecurityEvent } from './security-event';

/** SQL for `audit_events`: the only code that writes or reads it. */

export interface AuditRow {
  id: string;
  at: Date;
  type: string;
  actor: string;
  action: string | null;
  unit: string | null;
  workspace: string | null;
  outcome: string;
  door: string | null;
  request_id: string | null;
  client_ip: string | null;
  details: Record<string, unknown> | null;
  count: number;
}

export interface AuditFilter {
  actor?: string;
  unit?: string;
  action?: string;
  type?: string;
  since?: Date;
  until?: Date;
  /** Only events with an id below this (cursor pagination, newest first). */
  before?: string;
  limit: number;
}

/** An event as one row: `count` > 1 for repeated anonymous refusals folded together. */
export interface StoredEvent {
  event: SecurityEvent;
  count: number;
}

const COLUMNS = 12;

/** Inserts the events in one statement (the caller's transaction, or the pool for a batch). */
export async function insertAuditEvents(q: Queryable, rows: StoredEvent[]): Promise<void> {
  const values = rows.map((_, r) => {
    const b = r * COLUMNS;
    const p = (i: number) => `$${b + i}`;
    return `(${p(1)}::timestamptz, ${p(2)}, ${p(3)}, ${p(4)}, ${p(5)}, ${p(6)}, ${p(7)}, ${p(8)}, ${p(9)}, ${p(10)}, ${p(11)}::jsonb, ${p(12)}::int)`;
  });
  await q.query(
    `INSERT INTO audit_events (at, type, actor, action, unit, workspace, outcome, door, request_id, client_ip, details, count)
          VALUES ${values.join(', ')}`,
    rows.flatMap(({ event: e, count }) => [
      e.at,
      e.type,
      e.actor,
      e.action ?? null,
      e.unit ?? null,
      e.workspace ?? null,
      e.outcome,
      e.door ?? null,
      e.requestId ?? null,
      e.clientIp ?? null,
      e.details === undefined ? null : JSON.stringify(e.details),
      count,
    ]),
  );
}

/** Newest first, filtered; `before` is the id cursor. */
export async function findAuditEvents(q: Queryable, filter: AuditFilter): Promise<AuditRow[]> {
  return (await q.query(
    `SELECT * FROM audit_events
        WHERE ($1::text IS NULL OR actor = $1)
          AND ($2::text IS NULL OR unit = $2)
          AND ($3::text IS NULL OR action = $3)
          AND ($4::text IS NULL OR type = $4)
          AND ($5::timestamptz IS NULL OR at >= $5)
          AND ($6::timestamptz IS NULL OR at < $6)
          AND ($7::bigint IS NULL OR id < $7)
        ORDER BY id DESC LIMIT $8`,
    [
      filter.actor ?? null,
      filter.unit ?? null,
      filter.action ?? null,
      filter.type ?? null,
      filter.since ?? null,
      filter.until ?? null,
      filter.before ?? null,
      filter.limit,
    ],
  )) as AuditRow[];
}
