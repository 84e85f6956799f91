import { Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { Counter, Gauge } from 'prom-client';
import { DataSource } from 'typeorm';
import { AuditService } from '../audit/audit.service';
import { poolUse, StatementCounts } from '../database/data-source';
import { tokenVerifications } from '../auth/tokens/verification-counts';
import { LocksService } from '../state/locks/locks.service';
import { StateRepository } from '../state/state.repository';
import { CachedReading } from './cached-reading';
import { MetricsService } from '../metrics/metrics.service';

/** Held locks are read from the database at most this often, whatever the scrape rate. */
const LOCKS_FRESH_MS = 5_000;
/** A scrape waits this long for that read (the embedded database has one connection). */
const LOCKS_WAIT_MS = 2_000;
/** After this long without a successful read the lock gauges show no value. */
const LOCKS_STALE_MS = 60_000;

/**
 * The metrics read from other modules at scrape time — held locks (from the database, cached),
 * the connection pool, the audit log's losses — and the authentication failures, counted from
 * the security events the audit service logs (every refusal of a credential is one).
 */
@Injectable()
export class MetricsSources implements OnModuleInit {
  private readonly logger = new Logger('metrics');

  constructor(
    private readonly metrics: MetricsService,
    private readonly locks: LocksService,
    private readonly audit: AuditService,
    private readonly db: DataSource,
    private readonly states: StateRepository,
    private readonly statements: StatementCounts,
  ) {}

  onModuleInit(): void {
    this.audit.observe((event) => {
      if (event.type === 'auth.failed') this.metrics.authFailed(event.door, event.details);
    });
    const registers = [this.metrics.registry];

    const held = new CachedReading(
      () => this.locks.heldSummary(),
      { freshMs: LOCKS_FRESH_MS, waitMs: LOCKS_WAIT_MS, staleMs: LOCKS_STALE_MS },
      (e) => this.logger.debug({ err: e }, 'could not read the held locks for /metrics'),
    );
    new Gauge({
      name: 'statehouse_locks_held',
      help: 'Locks held now, on all replicas (read from the database: aggregate with max())',
      registers,
      async collect() {
        const r = await held.get();
        if (r) this.set(r.value.held);
        else this.remove(); // no sample: unknown is not 0 (reset() would show 0)
      },
    });
    new Gauge({
      name: 'statehouse_lock_oldest_age_seconds',
      help: 'Age of the oldest held lock, 0 when none is held (from the database: aggregate with max())',
      registers,
      async collect() {
        const r = await held.get();
        if (!r) this.remove();
        else if (r.value.held === 0) this.set(0);
        else this.set(r.value.oldestAgeSeconds + (Date.now() - r.at) / 1000);
      },
    });

    const states = this.states;
    new Counter({
      name: 'statehouse_state_read_cache_total',
      help: 'Current-version lookups of state reads on the embedded database, answered from memory (hit) or by a query (miss)',
      labelNames: ['result'],
      registers,
      collect() {
        const { hits, misses } = states.currentCacheCounts();
        this.reset();
        this.inc({ result: 'hit' }, hits);
        this.inc({ result: 'miss' }, misses);
      },
    });

    const statements = this.statements;
    new Counter({
      name: 'statehouse_database_statements_total',
      help: 'Statements sent to the database by this process: inserts into the audit log (audit), and all the rest (other)',
      labelNames: ['kind'],
      registers,
      collect() {
        this.reset();
        this.inc({ kind: 'audit' }, statements.audit);
        this.inc({ kind: 'other' }, statements.other);
      },
    });

    new Counter({
      name: 'statehouse_token_verifications_total',
      help: 'Presented access tokens, S3 session tokens and API tokens, by how they were verified: in full, a kept verdict reused, or refused',
      labelNames: ['credential', 'result'],
      registers,
      collect() {
        this.reset();
        for (const [credential, results] of Object.entries(tokenVerifications)) {
          for (const [result, count] of Object.entries(results)) {
            this.inc({ credential, result }, count);
          }
        }
      },
    });

    const pool = (
      name: string,
      help: string,
      read: (u: NonNullable<ReturnType<typeof poolUse>>) => number,
    ) => {
      const db = this.db;
      new Gauge({
        name,
        help,
        registers,
        collect() {
          const use = poolUse(db);
          if (use) this.set(read(use));
          else this.remove();
        },
      });
    };
    pool(
      'statehouse_db_pool_connections',
      'Database connections open (idle or in use)',
      (u) => u.total,
    );
    pool(
      'statehouse_db_pool_idle_connections',
      'Database connections open and idle',
      (u) => u.idle,
    );
    pool(
      'statehouse_db_pool_waiting_clients',
      'Queries waiting for a database connection (all of them in use)',
      (u) => u.waiting,
    );
    pool(
      'statehouse_db_pool_max_connections',
      'Most database connections this replica opens',
      (u) => u.max,
    );

    const audit = this.audit;
    new Counter({
      name: 'statehouse_audit_events_lost_total',
      help: 'Security events the audit log could not keep: queue full (database unreachable for long), or refused by the database',
      labelNames: ['reason'],
      registers,
      collect() {
        const lost = audit.lost();
        this.reset();
        this.inc({ reason: 'queue_full' }, lost.queueFull);
        this.inc({ reason: 'unstorable' }, lost.unstorable);
      },
    });
  }
}
