/**
 * `/metrics` against the real `statehouse serve` process (embedded database, or PostgreSQL with
 * DATABASE_URL): a workload through every door — the S3 door with signed requests, Terraform's
 * HTTP backend, the management API — with a lock conflict, a force-unlock, refused credentials
 * and a refused action, then a scrape: each metric moved by what was done, and every
 * `statehouse_*` series carries exactly its declared labels with allowed values (no unit name,
 * principal or path among them). The endpoint wants STATEHOUSE_METRICS_TOKEN when it is set,
 * and is public when it is not.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { freshServerEnv, ON_POSTGRES } from '../support/database';
import { labelProblems, parseExposition, Sample, valueOf } from '../support/metrics';
import { ROOT } from '../support/paths';
import { S3Creds, sendRaw, signS3 } from '../support/s3-signer';
import { RunningServer, spawnServer } from '../support/server';

jest.setTimeout(180_000);

const METRICS_TOKEN = 'metrics-e2e-token-0123456789abcdefghijkl';
const SUBJECT = `svc:metrics-e2e-${randomUUID().slice(0, 8)}`;
/** Names that must never show up in a scrape. */
const S3_UNIT = `team-${randomUUID().slice(0, 8)}/s3-app`;
const HTTP_UNIT = `team-${randomUUID().slice(0, 8)}/http-app`;
const API_UNIT = `team-${randomUUID().slice(0, 8)}/api-app`;

let server: RunningServer;
let cleanup: () => Promise<void>;
let apiToken: string;
let creds: S3Creds;

function state(serial: number, lineage: string): Buffer {
  return Buffer.from(
    JSON.stringify({
      version: 4,
      terraform_version: '1.11.0',
      serial,
      lineage,
      outputs: {},
      resources: [],
    }),
  );
}

function lockInfo(id: string): string {
  return JSON.stringify({
    ID: id,
    Operation: 'OperationTypeApply',
    Info: '',
    Who: 'metrics@e2e',
    Version: '1.11.0',
    Created: new Date().toISOString(),
    Path: '',
  });
}

async function api(
  method: string,
  path: string,
  options: { token?: string; body?: string; headers?: Record<string, string> } = {},
): Promise<Response> {
  return fetch(`${server.url}${path}`, {
    method,
    headers: {
      Authorization: `Bearer ${options.token ?? server.token}`,
      ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...options.headers,
    },
    body: options.body,
  });
}

const basic = (token: string): string =>
  `Basic ${Buffer.from(`terraform:${token}`).toString('base64')}`;

async function backend(method: string, unit: string, body?: Buffer | string, query = '') {
  return fetch(`${server.url}/v1/backend/${unit}${query}`, {
    method,
    headers: { Authorization: basic(apiToken) },
    body,
  });
}

async function s3(r: Parameters<typeof signS3>[2], as: S3Creds = creds) {
  return sendRaw(server.port, await signS3(server.port, as, r));
}

async function scrape(): Promise<{ text: string; samples: Sample[] }> {
  const r = await fetch(`${server.url}/metrics`, {
    headers: { Authorization: `Bearer ${METRICS_TOKEN}` },
  });
  expect(r.status).toBe(200);
  const text = await r.text();
  return { text, samples: parseExposition(text) };
}

/** The management API's operations as the metrics name them, from the committed OpenAPI spec. */
function apiOperations(): Set<string> {
  const doc = JSON.parse(readFileSync(join(ROOT, 'openapi/openapi.json'), 'utf8')) as {
    paths: Record<string, Record<string, unknown>>;
  };
  const ops = new Set<string>();
  for (const [path, methods] of Object.entries(doc.paths)) {
    const template = path.replace(/\{([^}]+)\}/g, ':$1');
    for (const m of Object.keys(methods)) ops.add(`${m.toUpperCase()} ${template}`);
  }
  return ops;
}

beforeAll(async () => {
  const fresh = await freshServerEnv();
  cleanup = fresh.cleanup;
  server = await spawnServer({ ...fresh.env, STATEHOUSE_METRICS_TOKEN: METRICS_TOKEN });
  const t = await api('POST', '/v1/auth/tokens', {
    body: JSON.stringify({ name: 'metrics e2e', subject: SUBJECT }),
  });
  expect(t.status).toBe(201);
  apiToken = ((await t.json()) as { token: string }).token;
  const c = await api('POST', '/v1/auth/issue-s3-creds', { token: apiToken });
  expect(c.status).toBe(200);
  creds = (await c.json()) as S3Creds;
});

afterAll(async () => {
  await server?.stop();
  await cleanup?.();
});

describe('the metrics endpoint with STATEHOUSE_METRICS_TOKEN set', () => {
  it('answers 401 in JSON without the token or with another, and 200 with it', async () => {
    const none = await fetch(`${server.url}/metrics`);
    expect(none.status).toBe(401);
    expect(((await none.json()) as { code: string }).code).toBe('unauthenticated');
    for (const authorization of [`Bearer ${METRICS_TOKEN}x`, `Bearer ${server.token}`]) {
      const wrong = await fetch(`${server.url}/metrics`, { headers: { authorization } });
      expect(wrong.status).toBe(401);
    }
    const ok = await fetch(`${server.url}/metrics`, {
      headers: { Authorization: `Bearer ${METRICS_TOKEN}` },
    });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(ok.headers.get('cache-control')).toBe('no-store');
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      version: string;
    };
    expect(await ok.text()).toContain(`statehouse_build_info{version="${version}"} 1`);
  });
});

describe('a scrape after a workload through every door', () => {
  let before: Sample[];
  let after: Sample[];
  let text: string;
  const delta = (name: string, labels: Record<string, string> = {}): number =>
    (valueOf(after, name, labels) ?? 0) - (valueOf(before, name, labels) ?? 0);

  beforeAll(async () => {
    before = (await scrape()).samples;
    const lineage = randomUUID();

    // The S3 door: a state written, read, listed; a lock object taken; one bad signature.
    expect(
      (await s3({ method: 'PUT', key: `${S3_UNIT}/terraform.tfstate`, body: state(1, lineage) }))
        .status,
    ).toBe(200);
    expect((await s3({ method: 'GET', key: `${S3_UNIT}/terraform.tfstate` })).status).toBe(200);
    expect(
      (await s3({ method: 'GET', key: '', query: { 'list-type': '2', prefix: 'team' } })).status,
    ).toBe(200);
    const s3Lock = await s3({
      method: 'PUT',
      key: `${S3_UNIT}/terraform.tfstate.tflock`,
      headers: { 'if-none-match': '*' },
      body: Buffer.from(lockInfo(randomUUID())),
    });
    expect(s3Lock.status).toBe(200);
    const forged = await s3(
      { method: 'GET', key: `${S3_UNIT}/terraform.tfstate` },
      { ...creds, SecretAccessKey: `${creds.SecretAccessKey.slice(0, -2)}xx` },
    );
    expect(forged.status).toBe(403);

    // Terraform's HTTP backend: lock, a conflicting lock, a write under the lock, a read.
    const id = randomUUID();
    expect((await backend('LOCK', HTTP_UNIT, lockInfo(id))).status).toBe(200);
    expect((await backend('LOCK', HTTP_UNIT, lockInfo(randomUUID()))).status).toBe(423);
    expect((await backend('POST', HTTP_UNIT, state(1, lineage), `?ID=${id}`)).status).toBe(200);
    expect((await backend('GET', HTTP_UNIT)).status).toBe(200);
    const anonymous = await fetch(`${server.url}/v1/backend/${HTTP_UNIT}`);
    expect(anonymous.status).toBe(401);

    // The management API: a unit, a lock the pipeline may not break (RBAC not initialised:
    // force-unlock is the admin's), broken by the admin; a token nobody issued.
    const name = encodeURIComponent(API_UNIT);
    expect(
      (await api('POST', '/v1/units', { body: JSON.stringify({ name: API_UNIT }) })).status,
    ).toBe(201);
    expect(
      (await api('POST', `/v1/units/${name}/lock`, { token: apiToken, body: '{}' })).status,
    ).toBe(200);
    expect((await api('POST', `/v1/units/${name}/force-unlock`, { token: apiToken })).status).toBe(
      403,
    );
    expect((await api('POST', `/v1/units/${name}/force-unlock`)).status).toBe(200);
    expect((await api('GET', '/v1/units', { token: 'sht_not-a-token-anyone-issued' })).status).toBe(
      401,
    );
    // A path no route takes (answered 400 unknown_route: a 404 means "no state" to Terraform).
    expect((await api('GET', '/v1/no-such-route')).status).toBe(400);

    // Two locks are held now (the S3 door's and the backend's). The lock gauges are read at
    // most every 5 s, and a request is recorded once its answer is out (which its client may
    // see first): wait for a scrape that has both the locks and the last request.
    const deadline = Date.now() + 30_000;
    for (;;) {
      ({ text, samples: after } = await scrape());
      const last = delta('statehouse_http_request_duration_seconds_count', {
        door: 'api',
        operation: 'unrouted',
        status: '4xx',
      });
      if (valueOf(after, 'statehouse_locks_held') === 2 && last === 1) break;
      if (Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 200));
    }
  });

  it('times requests by door, operation and status class', () => {
    const count = (door: string, operation: string, status: string) =>
      delta('statehouse_http_request_duration_seconds_count', { door, operation, status });
    expect(count('s3', 'PutObject', '2xx')).toBe(2);
    expect(count('s3', 'GetObject', '2xx')).toBe(1);
    expect(count('s3', 'GetObject', '4xx')).toBe(1);
    expect(count('s3', 'ListObjectsV2', '2xx')).toBe(1);
    expect(count('backend', 'lock', '2xx')).toBe(1);
    expect(count('backend', 'lock', '4xx')).toBe(1);
    expect(count('backend', 'update', '2xx')).toBe(1);
    expect(count('backend', 'get', '2xx')).toBe(1);
    expect(count('backend', 'get', '4xx')).toBe(1);
    expect(count('api', 'POST /v1/units', '2xx')).toBe(1);
    expect(count('api', 'POST /v1/units/:name/force-unlock', '2xx')).toBe(1);
    expect(count('api', 'POST /v1/units/:name/force-unlock', '4xx')).toBe(1);
    expect(count('api', 'GET /v1/units', '4xx')).toBe(1);
    expect(count('api', 'unrouted', '4xx')).toBe(1);
    const sum = delta('statehouse_http_request_duration_seconds_sum', {
      door: 'backend',
      operation: 'update',
      status: '2xx',
    });
    expect(sum).toBeGreaterThan(0);
    expect(sum).toBeLessThan(30);
  });

  it('counts lock acquisitions, conflicts and force-unlocks by door, and reads the held locks', () => {
    expect(delta('statehouse_lock_acquisitions_total', { door: 's3' })).toBe(1);
    expect(delta('statehouse_lock_acquisitions_total', { door: 'backend' })).toBe(1);
    expect(delta('statehouse_lock_acquisitions_total', { door: 'api' })).toBe(1);
    expect(delta('statehouse_lock_conflicts_total', { door: 'backend' })).toBe(1);
    expect(delta('statehouse_lock_conflicts_total', { door: 's3' })).toBe(0);
    expect(delta('statehouse_lock_force_unlocks_total', { door: 'api' })).toBe(1);
    expect(valueOf(after, 'statehouse_locks_held')).toBe(2);
    const age = valueOf(after, 'statehouse_lock_oldest_age_seconds') as number;
    expect(age).toBeGreaterThan(0);
    expect(age).toBeLessThan(120);
  });

  it('counts versions written by door, and observes the sizes of the states written', () => {
    expect(delta('statehouse_state_versions_written_total', { door: 's3' })).toBe(1);
    expect(delta('statehouse_state_versions_written_total', { door: 'backend' })).toBe(1);
    expect(delta('statehouse_state_write_bytes_count', { door: 's3' })).toBe(1);
    expect(delta('statehouse_state_write_bytes_sum', { door: 'backend' })).toBe(
      state(1, 'x'.repeat(36)).length,
    );
  });

  it('counts authorization decisions by result, and authentication failures by door and reason', () => {
    expect(delta('statehouse_authz_decisions_total', { result: 'allow' })).toBeGreaterThan(5);
    expect(delta('statehouse_authz_decisions_total', { result: 'deny' })).toBe(1);
    const failures = (door: string, reason: string) =>
      delta('statehouse_auth_failures_total', { door, reason });
    expect(failures('s3', 'bad_signature')).toBe(1);
    expect(failures('backend', 'missing')).toBe(1);
    expect(failures('api', 'invalid')).toBe(1);
    const all = after
      .filter((s) => s.name === 'statehouse_auth_failures_total')
      .reduce((n, s) => n + s.value, 0);
    const was = before
      .filter((s) => s.name === 'statehouse_auth_failures_total')
      .reduce((n, s) => n + s.value, 0);
    expect(all - was).toBe(3);
  });

  it('reports the connection pool, and no lost audit events, database or blob store errors', () => {
    expect(valueOf(after, 'statehouse_db_pool_max_connections')).toBe(ON_POSTGRES ? 10 : 1);
    expect(valueOf(after, 'statehouse_db_pool_connections')).toBeGreaterThanOrEqual(1);
    for (const reason of ['queue_full', 'unstorable']) {
      expect(valueOf(after, 'statehouse_audit_events_lost_total', { reason })).toBe(0);
    }
    for (const s of after.filter((x) => x.name === 'statehouse_blob_store_errors_total')) {
      expect(`${s.labels.operation} ${s.value}`).toBe(`${s.labels.operation} 0`);
    }
    expect(valueOf(after, 'statehouse_db_errors_total', { kind: 'connection' })).toBe(0);
    expect(after.some((s) => s.name === 'process_resident_memory_bytes')).toBe(true);
  });

  it('labels every statehouse_* series only with its declared labels and allowed values', () => {
    expect(labelProblems(after, apiOperations())).toEqual([]);
    for (const secret of [S3_UNIT, HTTP_UNIT, API_UNIT, SUBJECT, 'team-', apiToken]) {
      expect(text).not.toContain(secret);
    }
  });
});

describe('the metrics endpoint without STATEHOUSE_METRICS_TOKEN', () => {
  it('is public', async () => {
    const fresh = await freshServerEnv();
    const open = await spawnServer(fresh.env);
    try {
      const r = await fetch(`${open.url}/metrics`);
      expect(r.status).toBe(200);
      expect(await r.text()).toContain('# TYPE statehouse_http_request_duration_seconds histogram');
    } finally {
      await open.stop();
      await fresh.cleanup();
    }
  });
});
