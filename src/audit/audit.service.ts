import {
  BeforeApplicationShutdown,
  Injectable,
  Logger,
  OnModuleInit,
  Optional,
} from '@nestjs/common';
import { DataSource, EntityManager } from 'typeorm';
import { isUnavailable } from '../common/error-mapping';
import { currentRequestContext } from '../common/request-context';
import { capText, escapeUnstorable } from '../common/text';
import {
  AuditFilter,
  AuditRow,
  auditEventInsert,
  findAuditEvents,
  INSERT_EVENTS,
  insertAuditEvents,
  StoredEvent,
} from './audit.repository';
import type { SqlParams } from '../database/sql';
import { afterCommit } from '../database/transaction';
import { StatementCounts } from '../database/data-source';
import { SecurityEvent } from './security-event';

export type { AuditFilter, AuditRow };

export type SecurityEventInput = Omit<SecurityEvent, 'at' | 'requestId' | 'clientIp'>;

/** An event recorded by the same single statement as the change it records (`inStatement`). */
export interface StatementRecord {
  /** The event, stamped as `recordIn` stamps it (request ID, client address, time). */
  readonly event: SecurityEvent;
  /** Its row's insert, a CTE body for the statement, done only when the SQL condition `when` holds. */
  readonly insert: (params: SqlParams, when: string) => string;
  /** Call once the statement has stored the row: logs the event and shows it to observers. */
  readonly stored: () => void;
}

const FLUSH_EVERY_MS = 250;
const FLUSH_AT = 200;
export const MAX_QUEUED = 20_000;
const BATCH_ROWS = 500;
/** After the database was unreachable, queued events wait this long before the next try. */
const RETRY_AFTER_MS = 1000;
/** At a stop, how many rounds of storing what is queued (events recorded meanwhile come after). */
const STOP_FLUSHES = 5;
/** Longest text kept of one value (names, reasons); longer ones are cut, marked with `…`. */
export const MAX_AUDIT_TEXT = 1024;
const MAX_DETAILS = 32;
/** The events logged on their request's line rather than on a line of their own. */
const ON_THE_REQUEST_LINE: ReadonlySet<SecurityEvent['type']> = new Set([
  'state.read',
  'state.write',
  'lock.acquire',
  'lock.release',
]);

interface Queued extends StoredEvent {
  /** The aggregation key of an anonymous refusal still counting up in its batch. */
  key?: string;
}

/** Events the audit log failed to keep since the start, by why. */
export interface AuditLosses {
  /** Dropped, oldest first, while the queue was full (database unreachable for long). */
  queueFull: number;
  /** Refused by the database one by one, for their content. */
  unstorable: number;
  /** Still queued when the process stopped with the database unreachable. */
  atShutdown: number;
}

/**
 * The audit log: an append-only table of security events (also written to the structured log).
 * Changes are recorded inside their own transaction (`recordIn`), so a change and its record
 * commit or vanish together. Reads and refusals are queued and written in batches off the
 * request path (`record`); repeated unauthenticated failures from one address within a batch
 * become one row with a count, so failed logins cannot be used to fill the database.
 *
 * No event is lost for another's content: every text is made storable before it is queued
 * (NUL and unpaired surrogates escaped, lengths capped); a batch the database refuses is
 * retried row by row, so only a row that still fails is lost — logged with its type, never its
 * content, and counted. A batch that fails because the database is unreachable goes back to
 * the queue (bounded: beyond 20,000 events the oldest are dropped and counted).
 */
@Injectable()
export class AuditService implements OnModuleInit, BeforeApplicationShutdown {
  private readonly logger = new Logger('audit');
  private queue: Queued[] = [];
  private readonly aggregated = new Map<string, Queued>();
  private timer?: NodeJS.Timeout;
  private flushing?: Promise<void>;
  private retryAt = 0;
  /** Dropped for a full queue since the last warning about it. */
  private droppedSinceWarning = 0;
  private readonly losses: AuditLosses = { queueFull: 0, unstorable: 0, atShutdown: 0 };
  private readonly observers: ((event: SecurityEvent) => void)[] = [];

  constructor(
    @Optional() private readonly db?: DataSource,
    @Optional() statements?: StatementCounts,
  ) {
    if (statements) statements.auditPrefix = INSERT_EVENTS;
  }

  onModuleInit(): void {
    if (!this.db) return;
    this.timer = setInterval(() => void this.flush(), FLUSH_EVERY_MS);
    this.timer.unref();
  }

  /**
   * At a stop, before the database closes (it closes in `onApplicationShutdown`, which Nest calls
   * only after every `beforeApplicationShutdown`): stores everything queued — after a batch that
   * is being stored, what was queued meanwhile — and gives up only when the database is
   * unreachable, saying how many events of which types were not stored.
   */
  async beforeApplicationShutdown(): Promise<void> {
    clearInterval(this.timer);
    for (let round = 0; round < STOP_FLUSHES; round++) {
      await this.flushing;
      if (this.queue.length === 0) break;
      this.retryAt = 0;
      await this.flush();
      if (this.retryAt > Date.now()) break; // unreachable: the batch went back to the queue
    }
    if (this.queue.length > 0) {
      const byType = countByType(this.queue);
      const events = Object.values(byType).reduce((a, b) => a + b, 0);
      this.losses.atShutdown += events;
      this.logger.error(
        { eventTypes: byType },
        `stopping with ${events} audit events not stored (the database is unreachable)`,
      );
      this.queue = [];
    }
  }

  /** What the audit log failed to keep since the start. */
  lost(): AuditLosses {
    return { ...this.losses };
  }

  /** Shows `observer` every event as it is logged (the metrics count authentication failures). */
  observe(observer: (event: SecurityEvent) => void): void {
    this.observers.push(observer);
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
      const q: Queued = { event, count: 1, key };
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
    await insertAuditEvents(m, [{ event, count: 1 }]);
    // Logged and shown to observers once, when the change it records has committed: the body
    // of a transaction may run again after a deadlock, and a rolled-back change did not happen.
    afterCommit(m, () => this.log(event));
    return event;
  }

  /**
   * Like `recordIn`, for a change made by one autocommit statement instead of a transaction
   * (the lock fast paths): the caller puts `insert` into its statement, so the change and its
   * record commit together, and calls `stored` when the statement says it made the change. The
   * row is the one `recordIn` would insert.
   */
  inStatement(input: SecurityEventInput): StatementRecord {
    const event = this.stamp(input);
    return {
      event,
      insert: (params, when) => auditEventInsert(params, event, when),
      stored: () => this.log(event),
    };
  }

  async flush(): Promise<void> {
    if (!this.db) return;
    if (this.flushing) return this.flushing;
    if (this.queue.length === 0 || Date.now() < this.retryAt) return;
    const batch = this.queue;
    this.queue = [];
    this.aggregated.clear();
    this.flushing = this.store(this.db, batch)
      .catch((e: unknown) => this.logger.error({ err: e }, 'storing audit events failed'))
      .finally(() => (this.flushing = undefined));
    return this.flushing;
  }

  /** Stores a batch; what the database could not take because it is unreachable is re-queued. */
  private async store(db: DataSource, batch: Queued[]): Promise<void> {
    for (let i = 0; i < batch.length; i += BATCH_ROWS) {
      const part = batch.slice(i, i + BATCH_ROWS);
      try {
        await insertAuditEvents(db, part);
      } catch (e) {
        const { handled, unreachable } = isUnavailable(e)
          ? { handled: 0, unreachable: e }
          : await this.storeOneByOne(db, part);
        if (unreachable !== undefined) {
          this.requeue(batch.slice(i + handled), unreachable);
          return;
        }
      }
    }
    if (this.droppedSinceWarning > 0) {
      this.logger.warn(
        `audit queue was full: the ${this.droppedSinceWarning} oldest read/refusal events were not stored`,
      );
      this.droppedSinceWarning = 0;
    }
  }

  /**
   * A batch the database refused for its content: each row on its own, so one bad row costs
   * only itself. Stops when the database becomes unreachable, saying how many rows were dealt
   * with (stored, or given up) before.
   */
  private async storeOneByOne(
    db: DataSource,
    part: Queued[],
  ): Promise<{ handled: number; unreachable?: unknown }> {
    for (let j = 0; j < part.length; j++) {
      try {
        await insertAuditEvents(db, [part[j]]);
      } catch (e) {
        if (isUnavailable(e)) return { handled: j, unreachable: e };
        this.losses.unstorable += part[j].count;
        this.logger.error(
          { eventType: part[j].event.type, err: e },
          'an audit event could not be stored; its type is logged, its content is not',
        );
      }
    }
    return { handled: part.length };
  }

  /** Back to the front of the queue, to be tried again after a pause; the oldest go first. */
  private requeue(rest: Queued[], cause: unknown): void {
    this.retryAt = Date.now() + RETRY_AFTER_MS;
    this.queue = rest.concat(this.queue);
    this.trimQueue();
    this.logger.warn(
      { err: cause },
      `the database is unreachable: ${this.queue.length} audit events wait in the queue`,
    );
  }

  private trimQueue(): void {
    const over = this.queue.length - MAX_QUEUED;
    if (over <= 0) return;
    for (const q of this.queue.splice(0, over)) {
      this.losses.queueFull += q.count;
      this.droppedSinceWarning += q.count;
      if (q.key !== undefined && this.aggregated.get(q.key) === q) this.aggregated.delete(q.key);
    }
  }

  /**
   * Stores everything queued so far. A batch already being stored holds only what was queued
   * before it began, so that one is waited for and then the rest is stored too.
   */
  async storeQueued(): Promise<void> {
    await this.flushing;
    await this.flush();
  }

  async query(filter: AuditFilter): Promise<AuditRow[]> {
    if (!this.db) return [];
    // A reader sees every event recorded before it asked (its own request's reads included).
    await this.storeQueued();
    return findAuditEvents(this.db, filter);
  }

  private enqueue(q: Queued): void {
    this.queue.push(q);
    this.trimQueue();
    if (this.queue.length >= FLUSH_AT) void this.flush();
  }

  private stamp(input: SecurityEventInput): SecurityEvent {
    const ctx = currentRequestContext();
    return storableEvent({
      ...input,
      // An event names its door, or takes the request's (reads, refusals, sign-ins, RBAC).
      door: input.door ?? ctx?.door,
      requestId: ctx?.requestId,
      clientIp: ctx?.clientIp,
      at: new Date().toISOString(),
    });
  }

  private log(event: SecurityEvent): void {
    // The hot path's events (a read, a write, a lock taken or released: what every plan and
    // apply sends) go on the request's own line while that is to come; others on their own.
    const line = ON_THE_REQUEST_LINE.has(event.type) ? currentRequestContext()?.line : undefined;
    if (line && !line.written && line.audit === undefined) line.audit = event;
    else this.logger.log({ msg: `security event ${event.type}`, audit: event });
    for (const observer of this.observers) observer(event);
  }
}

/** A text the database can store: NUL and unpaired surrogates escaped, at most 1,024 units. */
function storableText(s: string): string {
  return capText(escapeUnstorable(s), MAX_AUDIT_TEXT);
}

/**
 * The event as it is logged and stored: every text storable (a value an attacker chose — a
 * credential's scope, a header — must not stop this or any other event from being stored),
 * and at most 32 details.
 */
export function storableEvent(e: SecurityEvent): SecurityEvent {
  const text = (v: string | undefined) => (v === undefined ? undefined : storableText(v));
  const out: SecurityEvent = {
    ...e,
    actor: storableText(e.actor),
    action: text(e.action),
    unit: text(e.unit),
    workspace: text(e.workspace),
    requestId: text(e.requestId),
    clientIp: text(e.clientIp),
  };
  if (e.details !== undefined) {
    const details: NonNullable<SecurityEvent['details']> = {};
    for (const [k, v] of Object.entries(e.details).slice(0, MAX_DETAILS)) {
      Object.defineProperty(details, storableText(k), {
        value: typeof v === 'string' ? storableText(v) : v,
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    out.details = details;
  }
  return out;
}

function countByType(queue: Queued[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const q of queue) counts[q.event.type] = (counts[q.event.type] ?? 0) + q.count;
  return counts;
}
