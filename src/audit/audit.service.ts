import { Injectable, Logger, OnApplicationShutdown, OnModuleInit, Optional } from '@nestjs/common';
import { DataSource, EntityManager } from 'typeorm';
import { currentRequestContext } from '../common/request-context';
import { sqlRows } from '../database/sql';
import { SecurityEvent } from './security-event';

export type SecurityEventInput = Omit<SecurityEvent, 'at' | 'requestId' | 'clientIp'>;

const FLUSH_EVERY_MS = 250;
const FLUSH_AT = 200;
const MAX_QUEUED = 20_000;
const COLUMNS = 12;

interface Queued {
  event: SecurityEvent;
  count: number;
}

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

/**
 * The audit log: an append-only table of security events (also written to the structured log).
 * Changes are recorded inside their own transaction (`recordIn`), so a change and its record
 * commit or vanish together. Reads and refusals are queued and written in batches off the
 * request path (`record`); repeated unauthenticated failures from one address within a batch
 * become one row with a count, so failed logins cannot be used to fill the database.
 */
@Injectable()
export class AuditService implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('audit');
  private queue: Queued[] = [];
  private readonly aggregated = new Map<string, Queued>();
  private timer?: NodeJS.Timeout;
  private flushing?: Promise<void>;
  private dropped = 0;

  constructor(@Optional() private readonly db?: DataSource) {}

  onModuleInit(): void {
    if (!this.db) return;
    this.timer = setInterval(() => void this.flush(), FLUSH_EVERY_MS);
    this.timer.unref();
  }

  async onApplicationShutdown(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }

  /** Logs the event now and stores it with the next batch. */
  record(input: SecurityEventInput): SecurityEvent {
    const event = this.stamp(input);
    this.log(event);
    if (!this.db) return event;
    if (event.actor === 'anonymous' && event.outcome === 'denied') {
      const key = `${event.type}\u0000${event.clientIp ?? ''}\u0000${String(event.details?.reason ?? '')}`;
      const existing = this.aggregated.get(key);
      if (existing) {
        existing.count++;
        return event;
      }
      const q = { event, count: 1 };
      this.aggregated.set(key, q);
      this.enqueue(q);
      return event;
    }
    this.enqueue({ event, count: 1 });
    return event;
  }

  /** Logs the event and inserts it in the caller's transaction: it commits with the change. */
  async recordIn(m: EntityManager, input: SecurityEventInput): Promise<SecurityEvent> {
    const event = this.stamp(input);
    await m.query(insertSql(1), params([{ event, count: 1 }]));
    this.log(event);
    return event;
  }

  async flush(): Promise<void> {
    if (!this.db) return;
    if (this.flushing) return this.flushing;
    const batch = this.queue;
    if (batch.length === 0) return;
    this.queue = [];
    this.aggregated.clear();
    const db = this.db;
    this.flushing = (async () => {
      try {
        for (let i = 0; i < batch.length; i += 500) {
          const part = batch.slice(i, i + 500);
          await db.query(insertSql(part.length), params(part));
        }
        if (this.dropped > 0) {
          this.logger.warn(
            `audit queue was full: ${this.dropped} read/refusal events were not stored`,
          );
          this.dropped = 0;
        }
      } catch (e) {
        this.logger.error({ err: e }, `could not store ${batch.length} audit events`);
      } finally {
        this.flushing = undefined;
      }
    })();
    return this.flushing;
  }

  async query(filter: AuditFilter): Promise<AuditRow[]> {
    if (!this.db) return [];
    await this.flush();
    return sqlRows<AuditRow>(
      this.db.manager,
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
    );
  }

  private enqueue(q: Queued): void {
    if (this.queue.length >= MAX_QUEUED) {
      this.dropped++;
      return;
    }
    this.queue.push(q);
    if (this.queue.length >= FLUSH_AT) void this.flush();
  }

  private stamp(input: SecurityEventInput): SecurityEvent {
    const ctx = currentRequestContext();
    return {
      ...input,
      // An event names its door, or takes the request's (reads, refusals, sign-ins, RBAC).
      door: input.door ?? ctx?.door,
      requestId: ctx?.requestId,
      clientIp: ctx?.clientIp,
      at: new Date().toISOString(),
    };
  }

  private log(event: SecurityEvent): void {
    this.logger.log({ msg: `security event ${event.type}`, audit: event });
  }
}

function insertSql(rows: number): string {
  const values = Array.from({ length: rows }, (_, r) => {
    const b = r * COLUMNS;
    const p = (i: number) => `$${b + i}`;
    return `(${p(1)}::timestamptz, ${p(2)}, ${p(3)}, ${p(4)}, ${p(5)}, ${p(6)}, ${p(7)}, ${p(8)}, ${p(9)}, ${p(10)}, ${p(11)}::jsonb, ${p(12)}::int)`;
  });
  return `INSERT INTO audit_events (at, type, actor, action, unit, workspace, outcome, door, request_id, client_ip, details, count)
          VALUES ${values.join(', ')}`;
}

function params(batch: Queued[]): unknown[] {
  return batch.flatMap(({ event: e, count }) => [
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
  ]);
}
