import { Queryable, SqlParams } from '../database/sql';
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

/** How every insert into the audit log starts (the statement counter tells them by it). */
export const INSERT_EVENTS =
  'INSERT INTO audit_events (at, type, actor, action, unit, workspace, outcome, door, request_id, client_ip, details, count)';

/** One row's values, as placeholders added to `params` (in the column order of INSERT_EVENTS). */
function rowValues(params: SqlParams, { event: e, count }: StoredEvent): string {
  return [
    params.add(e.at, 'timestamptz'),
    params.add(e.type, 'text'),
    params.add(e.actor, 'text'),
    params.add(e.action ?? null, 'text'),
    params.add(e.unit ?? null, 'text'),
    params.add(e.workspace ?? null, 'text'),
    params.add(e.outcome, 'text'),
    params.add(e.door ?? null, 'text'),
    params.add(e.requestId ?? null, 'text'),
    params.add(e.clientIp ?? null, 'text'),
    params.add(e.details === undefined ? null : JSON.stringify(e.details), 'jsonb'),
    params.add(count, 'int'),
  ].join(', ');
}

/** Inserts the events in one statement (the caller's transaction, or the pool for a batch). */
export async function insertAuditEvents(q: Queryable, rows: StoredEvent[]): Promise<void> {
  const params = new SqlParams();
  const values = rows.map((row) => `(${rowValues(params, row)})`);
  await q.query(`${INSERT_EVENTS} VALUES ${values.join(', ')}`, params.values);
}

/**
 * The insert of one event's row as a data-modifying CTE body for a statement another module's
 * repository composes (its change and this record in one statement, so both happen or neither
 * does): the row is inserted only when `when`, an SQL condition of that statement (e.g.
 * `EXISTS (SELECT 1 FROM won)`), holds. The row is the one `insertAuditEvents` would store.
 */
export function auditEventInsert(params: SqlParams, event: SecurityEvent, when: string): string {
  return `${INSERT_EVENTS} SELECT ${rowValues(params, { event, count: 1 })} WHERE ${when}`;
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
