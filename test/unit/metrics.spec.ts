import { Logger } from '@nestjs/common';
import fc from 'fast-check';
import type { Request, Response } from 'express';
import { EventEmitter } from 'node:events';
import { Readable } from 'node:stream';
import type { DataSource } from 'typeorm';
import type { ExecutionContext } from '@nestjs/common';
import { AuditService } from '../../src/audit/audit.service';
import type { SecurityEvent } from '../../src/audit/security-event';
import { DomainError } from '../../src/common/errors';
import { RequestContext, runWithRequestContext } from '../../src/common/request-context';
import { loadConfig } from '../../src/config/config';
import type { LocksService } from '../../src/state/locks/locks.service';
import type { StateRepository } from '../../src/state/state.repository';
import { CachedReading } from '../../src/monitoring/cached-reading';
import {
  AUTH_FAILURE_REASONS,
  authFailureReason,
  BACKEND_OPERATIONS,
  DB_ERROR_KINDS,
  dbErrorKind,
  doorOfUnroutedPath,
  S3_OPERATIONS,
  statusIndex,
} from '../../src/metrics/metric-labels';
import { backendOperation } from '../../src/backend/backend-operation';
import { queryHas } from '../../src/common/query-has';
import { s3Operation } from '../../src/s3compat/s3-operation';
import { MetricsSources } from '../../src/monitoring/metrics-sources';
import { StatementCounts } from '../../src/database/data-source';
import { tokenVerifications } from '../../src/auth/tokens/verification-counts';
import { MetricsTokenGuard } from '../../src/monitoring/metrics-token.guard';
import { MetricsService } from '../../src/metrics/metrics.service';
import type { IncomingMessage } from 'node:http';
import { requestMetrics } from '../../src/monitoring/request-metrics';
import { markAtRoot } from '../../src/s3compat/s3-request';
import { BlobNotFoundError, BlobStore } from '../../src/storage/blob-store';
import { MemoryBlobStore } from '../../src/storage/memory-blob.store';
import { ObservedBlobStore } from '../../src/storage/observed-blob.store';
import { labelProblems, parseExposition, valueOf } from '../support/metrics';

Logger.overrideLogger(false);

const METHODS = ['GET', 'HEAD', 'PUT', 'POST', 'DELETE', 'PATCH', 'LOCK', 'UNLOCK', 'OPTIONS'];

describe('s3Operation', () => {
  it.each([
    ['GET', '/s3', 'ListBuckets'],
    ['GET', '/s3/', 'ListBuckets'],
    ['PUT', '/s3', 'NotImplemented'],
    ['HEAD', '/s3/tfstate', 'HeadBucket'],
    ['GET', '/s3/tfstate?location', 'GetBucketLocation'],
    ['GET', '/s3/tfstate/?versioning', 'GetBucketVersioning'],
    ['GET', '/s3/tfstate?list-type=2&prefix=team%2F', 'ListObjectsV2'],
    // ListObjects (v1): no list-type, and no sub-resource the door does not implement.
    ['GET', '/s3/tfstate?prefix=a', 'ListObjects'],
    ['GET', '/s3/tfstate', 'ListObjects'],
    ['GET', '/s3/tfstate?acl', 'NotImplemented'],
    ['GET', '/s3/tfstate?uploads', 'NotImplemented'],
    ['PUT', '/s3/tfstate', 'CreateBucket'],
    ['PUT', '/s3/tfstate?x-id=CreateBucket', 'CreateBucket'],
    ['PUT', '/s3/tfstate?versioning', 'NotImplemented'],
    ['GET', '/s3/tfstate?list-type=22', 'NotImplemented'],
    ['GET', '/s3/tfstate/team/app/terraform.tfstate', 'GetObject'],
    ['HEAD', '/s3/tfstate/team/app/terraform.tfstate', 'HeadObject'],
    ['PUT', '/s3/tfstate/team/app/terraform.tfstate', 'PutObject'],
    ['PUT', '/s3/tfstate/team/app/terraform.tfstate.tflock', 'PutObject'],
    ['DELETE', '/s3/tfstate/team/app/terraform.tfstate.tflock', 'DeleteObject'],
    ['POST', '/s3/tfstate/big?uploads', 'CreateMultipartUpload'],
    ['PUT', '/s3/tfstate/big?partNumber=1&uploadId=u1', 'UploadPart'],
    ['POST', '/s3/tfstate/big?uploadId=u1', 'CompleteMultipartUpload'],
    ['DELETE', '/s3/tfstate/big?uploadId=u1', 'AbortMultipartUpload'],
    ['GET', '/s3/tfstate/big?uploadId=u1', 'ListParts'],
    ['POST', '/s3/tfstate/big', 'NotImplemented'],
    ['PATCH', '/s3/tfstate/big', 'NotImplemented'],
    // A key holding "uploadId" in its name, or a slash in the query, is still an object.
    ['PUT', '/s3/tfstate/uploadId?x=a/b', 'PutObject'],
    ['GET', '/s3/tfstate?list-type=2&start-after=a/b', 'ListObjectsV2'],
    // The door at the root of a listener of its own.
    ['GET', '/', 'ListBuckets'],
    ['GET', '/tfstate/team/app/terraform.tfstate', 'GetObject'],
    ['HEAD', '/tfstate', 'HeadBucket'],
  ])('%s %s is %s', (method, url, op) => {
    expect(s3Operation(method, url)).toBe(op);
  });

  it('names one of the S3 operations for any method and URL', () => {
    fc.assert(
      fc.property(fc.constantFrom(...METHODS), fc.string({ maxLength: 80 }), (m, url) => {
        expect(S3_OPERATIONS).toContain(s3Operation(m, `/s3/${url}`));
        expect(S3_OPERATIONS).toContain(s3Operation(m, url));
      }),
    );
  });
});

describe('backendOperation', () => {
  it.each([
    ['GET', '/v1/backend/team/app', 'get'],
    ['HEAD', '/v1/backend/team/app', 'head'],
    ['POST', '/v1/backend/team/app?ID=abc', 'update'],
    ['PUT', '/v1/backend/team/app', 'update'],
    ['DELETE', '/v1/backend/team/app', 'delete'],
    ['LOCK', '/v1/backend/team/app', 'lock'],
    ['UNLOCK', '/v1/backend/team/app', 'unlock'],
    ['POST', '/v1/backend/team/app?lock', 'lock'],
    ['PUT', '/v1/backend/team/app?workspace=x&lock', 'lock'],
    ['DELETE', '/v1/backend/team/app?lock', 'unlock'],
    ['DELETE', '/v1/backend/team/app?locked=1', 'delete'],
    ['PATCH', '/v1/backend/team/app', 'unsupported'],
  ])('%s %s is %s', (method, url, op) => {
    expect(backendOperation(method, url)).toBe(op);
  });

  it('names one of the backend operations for any method and URL', () => {
    fc.assert(
      fc.property(fc.constantFrom(...METHODS), fc.string({ maxLength: 80 }), (m, url) => {
        expect(BACKEND_OPERATIONS).toContain(backendOperation(m, `/v1/backend/${url}`));
      }),
    );
  });
});

describe('queryHas', () => {
  it('finds a parameter by name, with or without a value', () => {
    expect(queryHas('/a?uploads', 'uploads')).toBe(true);
    expect(queryHas('/a?x=1&uploads=', 'uploads')).toBe(true);
    expect(queryHas('/a?x=1&uploadsX', 'uploads')).toBe(false);
    expect(queryHas('/a?xuploads', 'uploads')).toBe(false);
    expect(queryHas('/uploads', 'uploads')).toBe(false);
    expect(queryHas('/a?list-type=2', 'list-type', '2')).toBe(true);
    expect(queryHas('/a?list-type=20', 'list-type', '2')).toBe(false);
    expect(queryHas('/a?list-type', 'list-type', '2')).toBe(false);
  });

  it('agrees with URLSearchParams for plain names', () => {
    const name = fc.constantFrom('a', 'ab', 'lock', 'uploadId');
    const part = fc.tuple(name, fc.option(fc.constantFrom('', '1', 'x')));
    fc.assert(
      fc.property(fc.array(part, { maxLength: 5 }), name, (parts, wanted) => {
        const q = parts.map(([n, v]) => (v === null ? n : `${n}=${v}`)).join('&');
        expect(queryHas(`/p?${q}`, wanted)).toBe(new URLSearchParams(q).has(wanted));
      }),
    );
  });
});

describe('door of a request no route took, and the status class', () => {
  it('goes by the path prefix', () => {
    expect(doorOfUnroutedPath('/s3')).toBe('s3');
    expect(doorOfUnroutedPath('/S3/tfstate')).toBe('s3');
    expect(doorOfUnroutedPath('/s3x')).toBe('api');
    expect(doorOfUnroutedPath('/v1/backend/a%zz')).toBe('backend');
    expect(doorOfUnroutedPath('/v1/backends')).toBe('api');
    expect(doorOfUnroutedPath('/nope')).toBe('api');
  });

  it('classes statuses, and calls a request closed before any answer aborted', () => {
    expect([200, 204, 304, 404, 423, 500, 503].map((s) => statusIndex(s, true))).toEqual([
      0, 0, 1, 2, 2, 3, 3,
    ]);
    expect(statusIndex(200, false)).toBe(4);
  });
});

describe('authFailureReason', () => {
  // The messages and codes the server's checks give (auth guard, token services, S3 door).
  it.each([
    [{ reason: 'the token is not valid' }, 'invalid'],
    [{ reason: 'invalid bootstrap token' }, 'invalid'],
    [{ reason: 'API token rejected: unknown token' }, 'invalid'],
    [{ reason: 'API token rejected: it was revoked' }, 'revoked'],
    [{ reason: 'API token rejected: it has expired' }, 'expired'],
    [{ reason: 'access token rejected: "exp" claim timestamp check failed (expired)' }, 'expired'],
    [
      { reason: 'access token rejected: signature verification failed (bad_signature)' },
      'bad_signature',
    ],
    [
      { reason: 'access token rejected: the login session it belongs to has ended (revoked)' },
      'revoked',
    ],
    [{ reason: 'access token rejected: not a JWT (malformed)' }, 'malformed'],
    [{ endpoint: 'token', reason: 'refresh token rejected: unknown token' }, 'invalid'],
    [{ endpoint: 'token', reason: 'refresh token rejected: the session was revoked' }, 'revoked'],
    [
      {
        endpoint: 'token',
        reason: 'refresh token rejected: the session has expired; log in again',
      },
      'expired',
    ],
    [
      {
        endpoint: 'token',
        reason:
          'refresh token rejected: it was already used, so the whole session has been revoked',
      },
      'revoked',
    ],
    [
      { endpoint: 'exchange', reason: 'ID token rejected: it comes from another issuer (iss)' },
      'invalid',
    ],
    [
      {
        code: 'AccessDenied',
        reason:
          'Anonymous access is not allowed: sign requests with credentials from `statehouse creds --json`',
      },
      'missing',
    ],
    [
      {
        code: 'AccessDenied',
        reason: 'Statehouse credentials need their session token (X-Amz-Security-Token)',
      },
      'missing',
    ],
    [
      { code: 'AccessDenied', reason: 'The session token was refused: revoked (revoked)' },
      'revoked',
    ],
    [{ code: 'AccessDenied', reason: 'a signed request was sent again (replay)' }, 'replay'],
    [{ code: 'AccessDenied', reason: 'Request has expired' }, 'expired'],
    [{ code: 'AccessDenied', reason: 'Request is not valid yet' }, 'clock_skew'],
    [
      {
        code: 'AccessDenied',
        reason: 'There were headers present in the request which were not signed: x-amz-date',
      },
      'malformed',
    ],
    [
      { code: 'InvalidAccessKeyId', reason: 'The access key id is not one this server issued' },
      'invalid',
    ],
    [
      {
        code: 'SignatureDoesNotMatch',
        reason: 'The request signature we calculated does not match',
      },
      'bad_signature',
    ],
    [{ code: 'ExpiredToken', reason: 'The provided token has expired.' }, 'expired'],
    [{ code: 'RequestTimeTooSkewed', reason: 'The difference … is too large.' }, 'clock_skew'],
    [
      { code: 'AuthorizationHeaderMalformed', reason: 'The authorization header is malformed' },
      'malformed',
    ],
    [{ endpoint: 'metrics', reason: 'the metrics token is not valid' }, 'invalid'],
    [{ reason: 'something nobody wrote yet' }, 'other'],
    // Names an object has without being given them are not table entries.
    [{ code: '__proto__', reason: 'x (constructor)' }, 'other'],
    [{ code: 'toString', reason: 'x (__proto__)' }, 'other'],
    [undefined, 'other'],
  ] as const)('%j is %s', (details, reason) => {
    expect(authFailureReason(details)).toBe(reason);
  });

  it('answers one of the fixed reasons whatever the event says', () => {
    const value = fc.oneof(fc.string(), fc.integer(), fc.boolean(), fc.constant(null));
    fc.assert(
      fc.property(fc.dictionary(fc.constantFrom('code', 'reason', 'endpoint', 'x'), value), (d) => {
        expect(AUTH_FAILURE_REASONS).toContain(authFailureReason(d));
      }),
    );
  });
});

describe('dbErrorKind', () => {
  const pg = (code: string) => Object.assign(new Error('x'), { driverError: { code } });
  it('names timeouts, serialization failures and constraint violations by SQLSTATE', () => {
    expect(dbErrorKind(pg('57014'), true)).toBe('timeout');
    expect(dbErrorKind(new Error('Query read timeout'), false)).toBe('timeout');
    expect(dbErrorKind(pg('40001'), false)).toBe('serialization');
    expect(dbErrorKind(pg('40P01'), false)).toBe('serialization');
    expect(dbErrorKind(pg('23505'), false)).toBe('constraint');
    expect(dbErrorKind(Object.assign(new Error('x'), { code: 'ECONNREFUSED' }), true)).toBe(
      'connection',
    );
    expect(dbErrorKind(pg('42P01'), false)).toBe('other');
    expect(dbErrorKind('a string', false)).toBe('other');
    expect(DB_ERROR_KINDS).toContain(dbErrorKind(undefined, false));
  });
});

describe('MetricsService', () => {
  it('keeps every statehouse_* series within its declared labels, whatever is recorded', async () => {
    const metrics = new MetricsService();
    const route = { path: '/v1/units/:name' };
    const text = fc.string({ maxLength: 30 });
    fc.assert(
      fc.property(
        fc.constantFrom('s3', 'http', 'api', undefined),
        fc.constantFrom(...METHODS),
        text,
        fc.integer({ min: 100, max: 599 }),
        fc.dictionary(fc.constantFrom('code', 'reason'), text),
        (door, method, url, status, details) => {
          const s = statusIndex(status, status % 7 !== 0);
          metrics.requestObserved('s3', s3Operation(method, url), s, 0.01);
          metrics.requestObserved('backend', backendOperation(method, url), s, 0.01);
          metrics.routeObserved(route, method, s, 0.02);
          metrics.lockAcquired(door);
          metrics.lockConflict(door);
          metrics.forceUnlocked(door);
          metrics.stateWritten(door, url.length * 1000, status % 2 === 0);
          metrics.authzDecided(status % 2 === 0);
          metrics.authFailed(door, details);
          metrics.databaseFailed(new Error(url), status % 2 === 0 ? 'query' : 'pool');
          metrics.blobStoreFailed('get');
        },
      ),
      { numRuns: 300 },
    );
    const samples = parseExposition((await metrics.exposition()).body);
    const routes = new Set(METHODS.map((m) => `${m} /v1/units/:name`));
    expect(labelProblems(samples, routes)).toEqual([]);
    // The request histogram: at most one series per door, operation and status class.
    const series = samples.filter(
      (s) => s.name === 'statehouse_http_request_duration_seconds_count',
    );
    expect(series.length).toBeLessThanOrEqual(
      (S3_OPERATIONS.length + BACKEND_OPERATIONS.length + METHODS.length) * 5,
    );
    // Node's process metrics are there too.
    expect(samples.some((s) => s.name === 'process_cpu_seconds_total')).toBe(true);
  });

  it('starts every counter series at 0, so the first event is a visible increase', async () => {
    const samples = parseExposition((await new MetricsService().exposition()).body);
    expect(
      valueOf(samples, 'statehouse_auth_failures_total', { door: 's3', reason: 'replay' }),
    ).toBe(0);
    expect(valueOf(samples, 'statehouse_lock_conflicts_total', { door: 'backend' })).toBe(0);
    expect(valueOf(samples, 'statehouse_authz_decisions_total', { result: 'deny' })).toBe(0);
    expect(valueOf(samples, 'statehouse_blob_store_errors_total', { operation: 'put' })).toBe(0);
  });

  it('counts each kind of event under its labels', async () => {
    const metrics = new MetricsService();
    metrics.lockAcquired('http');
    metrics.lockAcquired('http');
    metrics.lockConflict('s3');
    metrics.forceUnlocked('api');
    metrics.stateWritten('s3', 2048, true);
    metrics.stateWritten('s3', 2048, false);
    metrics.versionRestored();
    metrics.authzDecided(false);
    metrics.credentialsMissing('http');
    metrics.authFailed('s3', { code: 'SignatureDoesNotMatch', reason: 'x' });
    metrics.databaseFailed(Object.assign(new Error('x'), { code: '40001' }), 'query');
    metrics.databaseFailed(new Error('gone'), 'pool');
    const s = parseExposition((await metrics.exposition()).body);
    expect(valueOf(s, 'statehouse_lock_acquisitions_total', { door: 'backend' })).toBe(2);
    expect(valueOf(s, 'statehouse_lock_conflicts_total', { door: 's3' })).toBe(1);
    expect(valueOf(s, 'statehouse_lock_force_unlocks_total', { door: 'api' })).toBe(1);
    expect(valueOf(s, 'statehouse_state_versions_written_total', { door: 's3' })).toBe(1);
    expect(valueOf(s, 'statehouse_state_versions_written_total', { door: 'api' })).toBe(1);
    expect(valueOf(s, 'statehouse_state_write_bytes_count', { door: 's3' })).toBe(2);
    expect(valueOf(s, 'statehouse_state_write_bytes_bucket', { door: 's3', le: '1024' })).toBe(0);
    expect(valueOf(s, 'statehouse_state_write_bytes_bucket', { door: 's3', le: '4096' })).toBe(2);
    expect(valueOf(s, 'statehouse_authz_decisions_total', { result: 'deny' })).toBe(1);
    expect(
      valueOf(s, 'statehouse_auth_failures_total', { door: 'backend', reason: 'missing' }),
    ).toBe(1);
    expect(
      valueOf(s, 'statehouse_auth_failures_total', { door: 's3', reason: 'bad_signature' }),
    ).toBe(1);
    expect(valueOf(s, 'statehouse_db_errors_total', { kind: 'serialization' })).toBe(1);
    expect(valueOf(s, 'statehouse_db_errors_total', { kind: 'connection' })).toBe(1);
  });

  it('looks a route’s series up once: later requests reuse it', () => {
    const metrics = new MetricsService();
    const route = { path: '/v1/locks' };
    const labels = jest.spyOn(
      (metrics as unknown as { requests: { labels: (...a: string[]) => unknown } }).requests,
      'labels',
    );
    for (let i = 0; i < 1000; i++) {
      metrics.routeObserved(route, 'GET', 0, 0.001);
      metrics.requestObserved('s3', 'GetObject', 0, 0.001);
    }
    expect(labels).toHaveBeenCalledTimes(2);
  });
});

describe('CachedReading', () => {
  function setup(read: () => Promise<number>) {
    let now = 1_000_000;
    const errors: unknown[] = [];
    const reading = new CachedReading(
      read,
      { freshMs: 5000, waitMs: 50, staleMs: 60_000 },
      (e) => errors.push(e),
      () => now,
    );
    return { reading, errors, advance: (ms: number) => (now += ms) };
  }

  it('reads once per fresh period however many scrapes come, one read at a time', async () => {
    let reads = 0;
    const { reading, advance } = setup(() => Promise.resolve(++reads));
    const all = await Promise.all([reading.get(), reading.get(), reading.get()]);
    expect(all.map((r) => r?.value)).toEqual([1, 1, 1]);
    advance(4999);
    expect((await reading.get())?.value).toBe(1);
    advance(1);
    expect((await reading.get())?.value).toBe(2);
    expect(reads).toBe(2);
  });

  it('does not keep a scrape waiting for a slow read; the next scrape gets its value', async () => {
    let finish: (v: number) => void = () => undefined;
    const { reading } = setup(() => new Promise<number>((r) => (finish = r)));
    const started = Date.now();
    expect(await reading.get()).toBeUndefined();
    expect(Date.now() - started).toBeLessThan(1000);
    finish(7);
    await new Promise((r) => setImmediate(r));
    expect((await reading.get())?.value).toBe(7);
  });

  it('keeps the last value through failures until it is stale, then shows none', async () => {
    let fail = false;
    const { reading, errors, advance } = setup(() =>
      fail ? Promise.reject(new Error('db down')) : Promise.resolve(3),
    );
    expect((await reading.get())?.value).toBe(3);
    fail = true;
    advance(30_000);
    expect((await reading.get())?.value).toBe(3);
    expect(errors).toHaveLength(1);
    advance(30_001);
    expect(await reading.get()).toBeUndefined();
    fail = false;
    advance(5000);
    expect((await reading.get())?.value).toBe(3);
  });
});

describe('ObservedBlobStore', () => {
  function observed(inner: BlobStore) {
    const failures: string[] = [];
    return { store: new ObservedBlobStore(inner, (op) => failures.push(op)), failures };
  }

  it('reports failures of the store by operation, not missing blobs', async () => {
    const broken = new Error('disk on fire');
    const inner = new MemoryBlobStore();
    const { store, failures } = observed(
      Object.assign(Object.create(inner) as BlobStore, {
        get: () => Promise.reject(broken),
        delete: () => Promise.reject(broken),
        ping: () => Promise.reject(broken),
        stat: (k: string) => Promise.reject(new BlobNotFoundError(k)),
      }),
    );
    await expect(store.get('a')).rejects.toBe(broken);
    await expect(store.delete('a')).rejects.toBe(broken);
    await expect(store.ping()).rejects.toBe(broken);
    await expect(store.stat('a')).rejects.toBeInstanceOf(BlobNotFoundError);
    expect(failures).toEqual(['get', 'delete', 'ping']);
    expect(store.driver).toBe('memory');
  });

  it('reports a put the store failed, not one its source failed', async () => {
    const inner = new MemoryBlobStore();
    const { store, failures } = observed(inner);
    await expect(store.put('ok', Readable.from([Buffer.from('x')]))).resolves.toEqual({ size: 1 });
    const source = new Readable({
      read() {
        this.destroy(new DomainError('too_large', 'too large'));
      },
    });
    await expect(store.put('refused', source)).rejects.toBeInstanceOf(DomainError);
    expect(failures).toEqual([]);
    const full = observed(
      Object.assign(Object.create(inner) as BlobStore, {
        put: (_k: string, body: Readable) => {
          body.destroy();
          return Promise.reject(new Error('ENOSPC'));
        },
      }),
    );
    await expect(full.store.put('full', Readable.from([Buffer.from('x')]))).rejects.toThrow(
      'ENOSPC',
    );
    expect(full.failures).toEqual(['put']);
  });
});

describe('MetricsTokenGuard', () => {
  const TOKEN = 'metrics-token-0123456789-abcdefghijklmnop';
  function guard(env: Record<string, string>) {
    const audit = new AuditService();
    const events: SecurityEvent[] = [];
    audit.observe((e) => events.push(e));
    const g = new MetricsTokenGuard(loadConfig({ NODE_ENV: 'test', ...env }), audit);
    const ask = (authorization?: string) =>
      g.canActivate({
        switchToHttp: () => ({ getRequest: () => ({ headers: { authorization } }) }),
      } as unknown as ExecutionContext);
    return { ask, events };
  }

  it('lets every scrape in when no token is configured', () => {
    expect(guard({}).ask()).toBe(true);
  });

  it('with a token configured, wants exactly it as a bearer token (refusals audited)', () => {
    const { ask, events } = guard({ STATEHOUSE_METRICS_TOKEN: TOKEN });
    expect(ask(`Bearer ${TOKEN}`)).toBe(true);
    for (const header of [
      undefined,
      `Bearer ${TOKEN}x`,
      `Bearer ${TOKEN.slice(1)}`,
      `Basic ${TOKEN}`,
    ]) {
      expect(() => ask(header)).toThrow(expect.objectContaining({ code: 'unauthenticated' }));
    }
    expect(events.map((e) => [e.type, authFailureReason(e.details)])).toEqual([
      ['auth.failed', 'missing'],
      ['auth.failed', 'invalid'],
      ['auth.failed', 'invalid'],
      ['auth.failed', 'missing'],
    ]);
    expect(JSON.stringify(events)).not.toContain(TOKEN.slice(1));
  });
});

describe('MetricsSources', () => {
  class LossyAudit extends AuditService {
    override lost() {
      return { queueFull: 7, unstorable: 2, atShutdown: 0 };
    }
  }

  async function scrapeWith(options: {
    held: () => Promise<{ held: number; oldestAgeSeconds: number }>;
    pool?: {
      totalCount: number;
      idleCount: number;
      waitingCount: number;
      options: { max: number };
    };
  }) {
    const metrics = new MetricsService();
    const audit = new LossyAudit();
    const locks = { heldSummary: options.held } as unknown as LocksService;
    const db = { driver: { master: options.pool } } as unknown as DataSource;
    const states = {
      currentCacheCounts: () => ({ hits: 3, misses: 1 }),
    } as unknown as StateRepository;
    const statements = Object.assign(new StatementCounts(), { audit: 5, other: 11 });
    new MetricsSources(metrics, locks, audit, db, states, statements).onModuleInit();
    audit.record({
      type: 'auth.failed',
      actor: 'anonymous',
      outcome: 'denied',
      door: 's3',
      details: { code: 'ExpiredToken', reason: 'The provided token has expired.' },
    });
    audit.record({ type: 'state.read', actor: 'svc:x', outcome: 'success', door: 's3' });
    return parseExposition((await metrics.exposition()).body);
  }

  it('reads held locks, the pool and the audit losses at scrape time; counts auth.failed events', async () => {
    const s = await scrapeWith({
      held: () => Promise.resolve({ held: 3, oldestAgeSeconds: 4000 }),
      pool: { totalCount: 4, idleCount: 1, waitingCount: 2, options: { max: 10 } },
    });
    expect(valueOf(s, 'statehouse_locks_held')).toBe(3);
    expect(valueOf(s, 'statehouse_lock_oldest_age_seconds')).toBeGreaterThanOrEqual(4000);
    expect(valueOf(s, 'statehouse_db_pool_connections')).toBe(4);
    expect(valueOf(s, 'statehouse_db_pool_idle_connections')).toBe(1);
    expect(valueOf(s, 'statehouse_db_pool_waiting_clients')).toBe(2);
    expect(valueOf(s, 'statehouse_db_pool_max_connections')).toBe(10);
    expect(valueOf(s, 'statehouse_audit_events_lost_total', { reason: 'queue_full' })).toBe(7);
    expect(valueOf(s, 'statehouse_audit_events_lost_total', { reason: 'unstorable' })).toBe(2);
    expect(valueOf(s, 'statehouse_auth_failures_total', { door: 's3', reason: 'expired' })).toBe(1);
    const failures = s.filter((x) => x.name === 'statehouse_auth_failures_total');
    expect(failures.reduce((n, x) => n + x.value, 0)).toBe(1);
    expect(valueOf(s, 'statehouse_state_read_cache_total', { result: 'hit' })).toBe(3);
    expect(valueOf(s, 'statehouse_state_read_cache_total', { result: 'miss' })).toBe(1);
  });

  it('reads the statements sent and the token verifications at scrape time', async () => {
    const s = await scrapeWith({ held: () => Promise.resolve({ held: 0, oldestAgeSeconds: 0 }) });
    expect(valueOf(s, 'statehouse_database_statements_total', { kind: 'audit' })).toBe(5);
    expect(valueOf(s, 'statehouse_database_statements_total', { kind: 'other' })).toBe(11);
    for (const [credential, results] of Object.entries(tokenVerifications)) {
      for (const [result, count] of Object.entries(results)) {
        const labels = { credential, result };
        expect(valueOf(s, 'statehouse_token_verifications_total', labels)).toBe(count);
      }
    }
  });

  it('shows no lock or pool value it could not read (a gap, not a wrong number)', async () => {
    const s = await scrapeWith({ held: () => Promise.reject(new Error('database down')) });
    for (const name of ['statehouse_locks_held', 'statehouse_lock_oldest_age_seconds']) {
      expect(valueOf(s, name)).toBeUndefined();
    }
    expect(valueOf(s, 'statehouse_db_pool_connections')).toBeUndefined();
  });

  it('shows an oldest-lock age of 0 when no lock is held', async () => {
    const s = await scrapeWith({ held: () => Promise.resolve({ held: 0, oldestAgeSeconds: 0 }) });
    expect(valueOf(s, 'statehouse_locks_held')).toBe(0);
    expect(valueOf(s, 'statehouse_lock_oldest_age_seconds')).toBe(0);
  });
});

describe('requestMetrics', () => {
  function request(url: string, method = 'GET') {
    const metrics = new MetricsService();
    const res = Object.assign(new EventEmitter(), {
      statusCode: 200,
      headersSent: false,
      writableEnded: false,
    });
    const req = { method, originalUrl: url };
    const ctx: RequestContext = { requestId: 'r', clientIp: undefined };
    runWithRequestContext(ctx, () =>
      requestMetrics(metrics)(req as Request, res as unknown as Response, () => {
        // The guard names the door; the router sets the route.
        ctx.door = 'http';
        Object.assign(req, { route: { path: '/v1/backend/*unit' } });
      }),
    );
    const statuses = async () =>
      parseExposition((await metrics.exposition()).body)
        .filter((s) => s.name === 'statehouse_http_request_duration_seconds_count')
        .map((s) => `${s.labels.door} ${s.labels.operation} ${s.labels.status} ${s.value}`);
    return { res, statuses };
  }

  it('records an answer its client closed on before the server ended it by its status', async () => {
    // A client with every byte of the body (Content-Length) may close before 'finish'.
    const { res, statuses } = request('/v1/backend/team/app');
    res.headersSent = true;
    res.emit('close');
    expect(await statuses()).toEqual(['backend get 2xx 1']);
  });

  it('counts a request refused before any route on the S3 listener as the S3 door, whatever its path', async () => {
    const metrics = new MetricsService();
    const res = Object.assign(new EventEmitter(), { statusCode: 503, headersSent: true });
    // What the S3 listener does to every request it hands on (`s3RootListener`).
    const req = { method: 'GET', originalUrl: '/v1/units' };
    markAtRoot(req as unknown as IncomingMessage);
    runWithRequestContext({ requestId: 'r', clientIp: undefined }, () =>
      requestMetrics(metrics)(req as Request, res as unknown as Response, () => undefined),
    );
    res.emit('finish');
    const series = parseExposition((await metrics.exposition()).body)
      .filter((s) => s.name === 'statehouse_http_request_duration_seconds_count')
      .map((s) => `${s.labels.door} ${s.labels.operation} ${s.labels.status} ${s.value}`);
    expect(series).toEqual(['s3 unrouted 5xx 1']);
  });

  it('records a request closed before any answer as aborted', async () => {
    const { res, statuses } = request('/v1/backend/team/app', 'LOCK');
    res.emit('close');
    expect(await statuses()).toEqual(['backend lock aborted 1']);
  });

  it('records a request once, at the end of its answer', async () => {
    const { res, statuses } = request('/v1/backend/team/app', 'POST');
    res.statusCode = 409;
    res.headersSent = true;
    res.writableEnded = true;
    res.emit('finish');
    res.emit('close');
    expect(await statuses()).toEqual(['backend update 4xx 1']);
  });
});
