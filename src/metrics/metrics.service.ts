import { Injectable } from '@nestjs/common';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { packageVersion } from '../common/version';
import { isUnavailable } from '../common/error-mapping';
import type { AuditDoor, Door } from '../common/door';
import type { BlobStoreOperation } from '../storage/observed-blob.store';
import {
  apiOperation,
  AUDIT_LOSS_REASONS,
  AUTH_FAILURE_REASONS,
  authFailureReason,
  AUTHZ_RESULTS,
  BLOB_OPERATIONS,
  CACHE_RESULTS,
  DB_ERROR_KINDS,
  dbErrorKind,
  DOOR_LABELS,
  DoorLabel,
  doorLabel,
  STATEMENT_KINDS,
  STATUS_LABELS,
  VERIFICATION_RESULTS,
  VERIFIED_CREDENTIALS,
} from './metric-labels';

/** Request latency buckets, in seconds: from a cached read to a large state written slowly. */
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** State sizes, in bytes: 1 KiB to 1 GiB, by powers of 4. */
const SIZE_BUCKETS = Array.from({ length: 11 }, (_, i) => 1024 * 4 ** i);

/**
 * The label names of every `statehouse_*` metric and the values each may take (`route`: the
 * management API's route templates, `S3_OPERATIONS`, `BACKEND_OPERATIONS` or `unrouted`, a
 * set bounded by the routes the server registers). A test scrapes after a varied workload and
 * holds every series to this.
 */
export const METRIC_LABELS = {
  statehouse_build_info: { version: 'any' },
  statehouse_http_request_duration_seconds: {
    door: DOOR_LABELS,
    operation: 'route',
    status: STATUS_LABELS,
  },
  statehouse_lock_acquisitions_total: { door: DOOR_LABELS },
  statehouse_lock_conflicts_total: { door: DOOR_LABELS },
  statehouse_lock_force_unlocks_total: { door: DOOR_LABELS },
  statehouse_locks_held: {},
  statehouse_lock_oldest_age_seconds: {},
  statehouse_state_write_bytes: { door: DOOR_LABELS },
  statehouse_state_versions_written_total: { door: DOOR_LABELS },
  statehouse_authz_decisions_total: { result: AUTHZ_RESULTS },
  statehouse_auth_failures_total: { door: DOOR_LABELS, reason: AUTH_FAILURE_REASONS },
  statehouse_audit_events_lost_total: { reason: AUDIT_LOSS_REASONS },
  statehouse_db_pool_connections: {},
  statehouse_db_pool_idle_connections: {},
  statehouse_db_pool_waiting_clients: {},
  statehouse_db_pool_max_connections: {},
  statehouse_db_errors_total: { kind: DB_ERROR_KINDS },
  statehouse_blob_store_errors_total: { operation: BLOB_OPERATIONS },
  statehouse_state_read_cache_total: { result: CACHE_RESULTS },
  statehouse_database_statements_total: { kind: STATEMENT_KINDS },
  statehouse_token_verifications_total: {
    credential: VERIFIED_CREDENTIALS,
    result: VERIFICATION_RESULTS,
  },
} as const satisfies Record<string, Record<string, readonly string[] | 'route' | 'any'>>;

type MetricName = keyof typeof METRIC_LABELS;
type LabelName<N extends MetricName> = Extract<keyof (typeof METRIC_LABELS)[N], string>;

/**
 * Node's process metrics (`process_*`, `nodejs_*`) belong to the process, not to an app: one
 * registry for them, made once, however many apps a process builds (tests build several).
 */
let processRegistry: Registry | undefined;
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

/** One series of the request histogram per status class (`STATUS_LABELS` order). */
type StatusSeries = ({ observe(seconds: number): void } | undefined)[];

/**
 * The metrics registry and the recorders the rest of the server calls where something happens
 * (`lockAcquired`, `stateWritten`, …). Label values come from `metric-labels.ts` only, and the
 * request histogram's series are looked up once per door, operation and status class, then kept,
 * so recording a request costs a map lookup and an observation.
 */
@Injectable()
export class MetricsService {
  readonly registry = new Registry();

  private readonly requests = histogram(
    this.registry,
    'statehouse_http_request_duration_seconds',
    'Time from a request’s arrival to the end of its answer, by door, operation and status class',
    LATENCY_BUCKETS,
  );
  private readonly lockAcquisitions = counter(
    this.registry,
    'statehouse_lock_acquisitions_total',
    'Locks acquired (a retried acquire by the holder is not counted again)',
  );
  private readonly lockConflicts = counter(
    this.registry,
    'statehouse_lock_conflicts_total',
    'Lock acquisitions refused because another lock was held',
  );
  private readonly forceUnlocks = counter(
    this.registry,
    'statehouse_lock_force_unlocks_total',
    'Locks removed by a force-unlock',
  );
  private readonly writeBytes = histogram(
    this.registry,
    'statehouse_state_write_bytes',
    'Sizes of the state bodies accepted by writes (new versions and byte-identical ones)',
    SIZE_BUCKETS,
  );
  private readonly versionsWritten = counter(
    this.registry,
    'statehouse_state_versions_written_total',
    'New state versions (writes and restores; a byte-identical write makes none)',
  );
  private readonly authzDecisions = counter(
    this.registry,
    'statehouse_authz_decisions_total',
    'Authorization decisions enforced on requests, by result',
  );
  /** Several decisions per request: their two series are looked up once. */
  private readonly allowed = this.authzDecisions.labels('allow');
  private readonly denied = this.authzDecisions.labels('deny');
  private readonly authFailures = counter(
    this.registry,
    'statehouse_auth_failures_total',
    'Requests whose credentials were missing or refused, by door and reason',
  );
  private readonly dbErrors = counter(
    this.registry,
    'statehouse_db_errors_total',
    'Failed database statements and broken pooled connections, by kind',
  );
  private readonly blobErrors = counter(
    this.registry,
    'statehouse_blob_store_errors_total',
    'Blob store operations that failed (not those failed by the client’s own upload)',
  );

  private readonly byDoor = new Map<DoorLabel, Map<string, StatusSeries>>(
    DOOR_LABELS.map((d) => [d, new Map()]),
  );
  private readonly byRoute = new WeakMap<object, Map<string, StatusSeries>>();

  constructor() {
    new Gauge({
      name: 'statehouse_build_info',
      help: 'The running version (always 1)',
      labelNames: ['version'],
      registers: [this.registry],
    }).set({ version: packageVersion(__dirname) }, 1);
  }

  /** Everything to expose: the app's metrics and the process's. */
  async exposition(): Promise<{ contentType: string; body: string }> {
    const body = (await this.registry.metrics()) + (await processMetrics().metrics());
    return { contentType: this.registry.contentType, body };
  }

  /** A finished (or abandoned) request of a door's named operation. */
  requestObserved(door: DoorLabel, operation: string, status: number, seconds: number): void {
    const doorSeries = this.byDoor.get(door) as Map<string, StatusSeries>;
    let series = doorSeries.get(operation);
    if (!series) {
      series = [];
      doorSeries.set(operation, series);
    }
    let s = series[status];
    if (!s) {
      s = this.requests.labels(door, operation, STATUS_LABELS[status]);
      series[status] = s;
    }
    s.observe(seconds);
  }

  /**
   * A finished request of a management API route, keyed by the router's route object (one per
   * registered route), so its operation label (`GET /v1/units/:name`) is built once, not per
   * request.
   */
  routeObserved(
    route: { path: string },
    method: string,
    status: number,
    seconds: number,
    door: 'api' | 'tfe' = 'api',
  ): void {
    let byMethod = this.byRoute.get(route);
    if (!byMethod) {
      byMethod = new Map();
      this.byRoute.set(route, byMethod);
    }
    let series = byMethod.get(method);
    if (!series) {
      series = [];
      byMethod.set(method, series);
    }
    let s = series[status];
    if (!s) {
      s = this.requests.labels(door, apiOperation(method, route.path), STATUS_LABELS[status]);
      series[status] = s;
    }
    s.observe(seconds);
  }

  lockAcquired(door: Door | undefined): void {
    this.lockAcquisitions.inc({ door: doorLabel(door) });
  }

  lockConflict(door: Door | undefined): void {
    this.lockConflicts.inc({ door: doorLabel(door) });
  }

  forceUnlocked(door: Door | undefined): void {
    this.forceUnlocks.inc({ door: doorLabel(door) });
  }

  /** An accepted state write of `bytes`; `created` when it made a new version. */
  stateWritten(door: Door | undefined, bytes: number, created: boolean): void {
    const label = doorLabel(door);
    this.writeBytes.observe({ door: label }, bytes);
    if (created) this.versionsWritten.inc({ door: label });
  }

  /** A restore that made a new version (always through the management API). */
  versionRestored(): void {
    this.versionsWritten.inc({ door: 'api' });
  }

  authzDecided(allowed: boolean): void {
    (allowed ? this.allowed : this.denied).inc();
  }

  /** An `auth.failed` security event: its door and the reason, reduced to a fixed set. */
  authFailed(
    door: AuditDoor | undefined,
    details: Record<string, string | number | boolean | null> | undefined,
  ): void {
    const label = door === 'cli' || door === 'system' ? 'api' : doorLabel(door);
    this.authFailures.inc({ door: label, reason: authFailureReason(details) });
  }

  /** A request to a route that needs a principal, with no credentials at all. */
  credentialsMissing(door: Door): void {
    this.authFailures.inc({ door: doorLabel(door), reason: 'missing' });
  }

  /** A failed statement (`query`) or a pooled connection that broke (`pool`). */
  databaseFailed(e: unknown, where: 'query' | 'pool'): void {
    const kind = where === 'pool' ? 'connection' : dbErrorKind(e, isUnavailable(e));
    this.dbErrors.inc({ kind });
  }

  blobStoreFailed(operation: BlobStoreOperation): void {
    this.blobErrors.inc({ operation });
  }
}

function labelNames<N extends MetricName>(name: N): LabelName<N>[] {
  return Object.keys(METRIC_LABELS[name]) as LabelName<N>[];
}

/**
 * Every combination of a metric's label values (for metrics whose labels all come from fixed
 * sets), so each series exists from the start at 0: `rate()` and `increase()` see the first
 * event instead of a series appearing.
 */
function allLabelSets(name: MetricName): Record<string, string>[] {
  let sets: Record<string, string>[] = [{}];
  const labels: Record<string, readonly string[] | 'route' | 'any'> = METRIC_LABELS[name];
  for (const [label, values] of Object.entries(labels)) {
    if (typeof values === 'string') return [];
    sets = sets.flatMap((set) => values.map((v) => ({ ...set, [label]: v })));
  }
  return sets;
}

/** A counter with all its series at 0. */
function counter<N extends MetricName>(
  registry: Registry,
  name: N,
  help: string,
): Counter<LabelName<N>> {
  const c = new Counter({ name, help, labelNames: labelNames(name), registers: [registry] });
  for (const set of allLabelSets(name)) c.inc(set, 0);
  return c;
}

function histogram<N extends MetricName>(
  registry: Registry,
  name: N,
  help: string,
  buckets: number[],
): Histogram<LabelName<N>> {
  return new Histogram({
    name,
    help,
    labelNames: labelNames(name),
    buckets,
    registers: [registry],
  });
}
