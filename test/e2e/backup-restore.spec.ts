/**
 * The backup and restore drill of README.md ("Backing up and restoring an installation"), run
 * from the README's own blocks — read out of README.md by their first line, so the procedure
 * the README gives and the one proven here cannot drift apart.
 *
 * An installation is filled with everything an operator would miss after a restore: units with
 * several workspaces and versions (a restored one, a 2.5 MB state of several 1 MiB chunks, an
 * OpenTofu-encrypted one, one written through `/s3`), a soft-deleted unit and workspace, a held
 * lock, RBAC permissions, roles and assignments, API tokens (one revoked), S3 credentials, a
 * discovered and a declared graph edge, and the audit log. It is backed up while it serves,
 * restored into an empty database and an empty blob directory, and Statehouse is started on
 * the restore. Then everything is read back through the API on both and compared: each unit,
 * workspace, version (the bytes of every one), lock, permission, role, assignment, token, graph
 * edge and status, and every audit event; and what was minted before the backup still works
 * after it (the API token, the S3 credentials, the lock's holder releasing it).
 *
 * On PostgreSQL (scripts/with-postgres.sh): `pg_dump` with `fs` blobs (and a write between the
 * dump and the blob copy, which must not reach the restore), with `postgres` blobs (the dump
 * alone), and the wrong order (a blob copy older than the dump), which the README's check after
 * a restore must catch. On the embedded database: the data directory, copied with the server
 * stopped. Each run reports the other's drills as skipped, by a name that says where they run.
 */
import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { spawn } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { Client } from 'pg';
import { freshDataDir, freshPostgresDatabase, ON_POSTGRES } from '../support/database';
import { onPath } from '../support/processes';
import { readme, readmeBlocks } from '../support/readme';
import { s3ClientFor } from '../support/s3-client';
import { S3Creds } from '../support/s3-signer';
import { childEnv, RunningServer, spawnServer } from '../support/server';

jest.setTimeout(600_000);

// ------------------------------------------------------------------ the README's procedure

const SECTION = 'Backing up and restoring an installation';

/** The one sh block of the README's backup section whose first line starts with `first`. */
function readmeStep(first: string): string {
  const found = readmeBlocks(readme()).filter(
    (b) => b.section === SECTION && b.lang === 'sh' && b.code.startsWith(first),
  );
  if (found.length !== 1) {
    throw new Error(
      `README.md, section "${SECTION}": expected one sh block starting with "${first}", found ${found.length}`,
    );
  }
  return found[0].code;
}

const STEP = {
  dump: readmeStep('# step 1: the database'),
  copyBlobs: readmeStep('# step 2, STATEHOUSE_STORAGE=fs only'),
  restoreDatabase: readmeStep('# the database: all of it or nothing'),
  restoreBlobs: readmeStep('# STATEHOUSE_STORAGE=fs only: the blobs'),
  embeddedBackup: readmeStep('# back up: with statehouse serve stopped'),
  embeddedRestore: readmeStep('# restore: into an empty data directory'),
};

interface Run {
  code: number | null;
  output: string;
}

/**
 * Runs a README block as an operator would: bash with `set -euo pipefail`, in the backup's
 * directory, with the installation's settings (and nothing of the test's own) in the
 * environment.
 */
function runStep(code: string, cwd: string, settings: Record<string, string>): Promise<Run> {
  return new Promise((resolve, reject) => {
    const p = spawn('bash', ['-c', `set -euo pipefail\n${code}`], {
      cwd,
      env: { ...childEnv(), LANG: 'C.UTF-8', ...settings },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    p.stdout.on('data', (d: Buffer) => (output += d.toString()));
    p.stderr.on('data', (d: Buffer) => (output += d.toString()));
    p.once('error', reject);
    p.once('exit', (exitCode) => resolve({ code: exitCode, output }));
  });
}

async function step(code: string, cwd: string, settings: Record<string, string>): Promise<void> {
  const r = await runStep(code, cwd, settings);
  if (r.code !== 0) {
    throw new Error(`README step failed (exit code ${r.code}):\n${code}\n--- output\n${r.output}`);
  }
}

// ------------------------------------------------------------------ talking to a server

/** A parsed JSON answer, read field by field as the API documents it. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

interface Answer {
  status: number;
  text: string;
  body: Buffer;
  json: Json;
}

async function call(
  s: RunningServer,
  method: string,
  path: string,
  options: { token?: string; body?: unknown; raw?: string | Buffer } = {},
): Promise<Answer> {
  const headers: Record<string, string> = {
    Authorization: `Bearer ${options.token ?? s.token}`,
  };
  let body: string | Buffer | undefined = options.raw;
  if (options.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(options.body);
  }
  const r = await fetch(`${s.url}${path}`, { method, headers, body });
  const bytes = Buffer.from(await r.arrayBuffer());
  const text = bytes.toString('utf8');
  let json: Json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: r.status, text, body: bytes, json };
}

/** `call`, failing the test unless the answer has `status`. */
async function ok(
  s: RunningServer,
  method: string,
  path: string,
  status: number,
  options: Parameters<typeof call>[3] = {},
): Promise<Answer> {
  const r = await call(s, method, path, options);
  if (r.status !== status) {
    throw new Error(`${method} ${path}: ${r.status}, expected ${status}: ${r.text.slice(0, 500)}`);
  }
  return r;
}

const enc = encodeURIComponent;

function tfstate(
  lineage: string,
  serial: number,
  outputs: Record<string, string>,
  extra: { resources?: unknown[]; padding?: number } = {},
): string {
  return `${JSON.stringify(
    {
      version: 4,
      terraform_version: '1.11.4',
      serial,
      lineage,
      outputs: Object.fromEntries(
        Object.entries({
          ...outputs,
          ...(extra.padding ? { padding: 'p'.repeat(extra.padding) } : {}),
        }).map(([k, v]) => [k, { value: v, type: 'string' }]),
      ),
      resources: extra.resources ?? [],
      check_results: null,
    },
    null,
    2,
  )}\n`;
}

/** A `terraform_remote_state` data source reading `unit` through this server's HTTP backend. */
function remoteState(s: RunningServer, unit: string, outputs: Record<string, string>): unknown {
  return {
    mode: 'data',
    type: 'terraform_remote_state',
    name: 'network',
    provider: 'provider["terraform.io/builtin/terraform"]',
    instances: [
      {
        schema_version: 0,
        attributes: {
          backend: 'http',
          config: { value: { address: `${s.url}/v1/backend/${unit}` }, type: ['object', {}] },
          defaults: null,
          outputs: { value: outputs, type: ['object', {}] },
          workspace: null,
        },
        sensitive_attributes: [],
      },
    ],
  };
}

function lockInfo(who: string): { ID: string; body: string } {
  const ID = randomUUID();
  const body = JSON.stringify({
    ID,
    Operation: 'OperationTypeApply',
    Info: '',
    Who: who,
    Version: '1.11.4',
    Created: new Date().toISOString(),
    Path: '',
  });
  return { ID, body };
}

// ------------------------------------------------------------------ an installation worth restoring

/** What was made before the backup, and is needed to check the restore. */
interface Made {
  /** Units that are deleted (not listed), looked up by name. */
  deleted: string[];
  ciToken: string;
  revokedToken: string;
  s3Creds: S3Creds;
  s3Body: Buffer;
  lock: { unit: string; ID: string };
  network: { lineage: string; serial: number };
}

const BIG = 2_500_000; // over two 1 MiB chunks of the postgres blob store

async function populate(s: RunningServer): Promise<Made> {
  // API tokens: one for a pipeline, one revoked (the revocation must survive the restore).
  const ci = await ok(s, 'POST', '/v1/auth/tokens', 201, {
    body: { name: 'ci-team', subject: 'svc:ci' },
  });
  const gone = await ok(s, 'POST', '/v1/auth/tokens', 201, {
    body: { name: 'old-pipeline', subject: 'svc:old' },
  });
  await ok(s, 'DELETE', `/v1/auth/tokens/${enc(gone.json.id)}`, 204);
  const ciToken = ci.json.token as string;

  // RBAC: initialised, with a permission of two rules (one a workspace-scoped deny), a role
  // and assignments to a service principal and a group.
  await ok(s, 'POST', '/v1/rbac/init', 201, { body: { admin: { group: 'platform-admins' } } });
  await ok(s, 'POST', '/v1/rbac/permissions', 201, {
    body: {
      name: 'team-rw',
      description: 'the team pipeline',
      rules: [
        {
          effect: 'allow',
          actions: ['unit.read', 'unit.write', 'unit.lock', 'unit.create', 'version.read'],
          resources: ['team/**'],
        },
        { effect: 'deny', actions: ['unit.write'], resources: ['team/*'], workspaces: ['prod'] },
      ],
    },
  });
  await ok(s, 'POST', '/v1/rbac/roles', 201, { body: { name: 'team', permissions: ['team-rw'] } });
  await ok(s, 'POST', '/v1/rbac/assignments', 201, { body: { role: 'team', subject: 'svc:ci' } });
  await ok(s, 'POST', '/v1/rbac/assignments', 201, { body: { role: 'reader', group: 'auditors' } });

  // team/network: three versions through the HTTP backend, then version 1 restored (4).
  const lineage = randomUUID();
  for (const serial of [1, 2, 3]) {
    await ok(s, 'POST', '/v1/backend/team/network', 200, {
      raw: tfstate(lineage, serial, { vpc_id: `vpc-${serial}` }),
    });
  }
  await ok(s, 'POST', `/v1/units/${enc('team/network')}/versions/1/restore`, 200);
  // …a second workspace through the API, and a third whose state is deleted (soft).
  await ok(s, 'PUT', `/v1/units/${enc('team/network')}/state?workspace=staging`, 200, {
    raw: tfstate(randomUUID(), 1, { vpc_id: 'vpc-staging' }),
  });
  await ok(s, 'PUT', `/v1/units/${enc('team/network')}/state?workspace=old`, 200, {
    raw: tfstate(randomUUID(), 1, { vpc_id: 'vpc-old' }),
  });
  await ok(s, 'DELETE', `/v1/units/${enc('team/network')}/state?workspace=old`, 204);

  // team/app reads team/network's outputs (a discovered edge) and is locked by the pipeline.
  await ok(s, 'POST', '/v1/backend/team/app', 200, {
    raw: tfstate(
      randomUUID(),
      1,
      { url: 'https://app' },
      {
        resources: [remoteState(s, 'team/network', { vpc_id: 'vpc-1' })],
      },
    ),
    token: ciToken,
  });
  const lock = lockInfo('ci@runner');
  await ok(s, 'POST', `/v1/units/${enc('team/app')}/lock`, 200, {
    raw: lock.body,
    token: ciToken,
  });

  // A large state (several chunks), a declared edge from it, an encrypted one, a deleted unit.
  await ok(s, 'POST', '/v1/backend/team/big', 200, {
    raw: tfstate(randomUUID(), 1, { id: 'big' }, { padding: BIG }),
  });
  await ok(s, 'POST', '/v1/graph/edges', 201, {
    body: { producer: { unit: 'team/big' }, consumer: { unit: 'team/app' }, name: 'big-ids' },
  });
  await ok(s, 'POST', '/v1/backend/team/secret', 200, {
    raw: JSON.stringify({
      meta: { 'key_provider.pbkdf2.main': 'eyJzYWx0IjoiLi4uIn0=' },
      encrypted_data: Buffer.from(randomUUID()).toString('base64'),
      encryption_version: 'v0',
    }),
  });
  await ok(s, 'POST', '/v1/backend/team/old', 200, { raw: tfstate(randomUUID(), 1, { x: 'y' }) });
  await ok(s, 'DELETE', `/v1/units/${enc('team/old')}`, 204);

  // The pipeline's S3 credentials, and a state written through /s3 with them.
  const creds = (await ok(s, 'POST', '/v1/auth/issue-s3-creds', 200, { token: ciToken }))
    .json as S3Creds;
  const s3Body = Buffer.from(tfstate(randomUUID(), 1, { door: 's3' }));
  const client = s3ClientFor(s, creds);
  try {
    await client.send(
      new PutObjectCommand({ Bucket: 'tfstate', Key: 'team/s3/terraform.tfstate', Body: s3Body }),
    );
  } finally {
    client.destroy();
  }

  return {
    deleted: ['team/old'],
    ciToken,
    revokedToken: gone.json.token as string,
    s3Creds: creds,
    s3Body,
    lock: { unit: 'team/app', ID: lock.ID },
    network: { lineage, serial: 3 },
  };
}

// ------------------------------------------------------------------ reading it all back

async function pages(s: RunningServer, path: string): Promise<Json[]> {
  const items: Json[] = [];
  let cursor: string | null = null;
  do {
    const sep = path.includes('?') ? '&' : '?';
    const page = await ok(
      s,
      'GET',
      `${path}${cursor === null ? '' : `${sep}cursor=${enc(cursor)}`}`,
      200,
    );
    items.push(...(page.json.items as unknown[]));
    cursor = page.json.nextCursor as string | null;
  } while (cursor !== null);
  return items;
}

/** A workspace's versions, each with the sha256 and length of the bytes the API serves for it. */
async function versionsOf(s: RunningServer, unit: string, workspace: string): Promise<unknown[]> {
  const path = `/v1/units/${enc(unit)}/versions?workspace=${enc(workspace)}`;
  const out: unknown[] = [];
  for (const v of await pages(s, `${path}&limit=2`)) {
    const content = await ok(
      s,
      'GET',
      `/v1/units/${enc(unit)}/versions/${v.version}?workspace=${enc(workspace)}`,
      200,
    );
    const served = createHash('sha256').update(content.body).digest('hex');
    // The bytes served are the bytes the version records…
    expect({ unit, workspace, version: v.version, served, length: content.body.length }).toEqual({
      unit,
      workspace,
      version: v.version,
      served: v.sha256,
      length: v.size,
    });
    // …and are kept, as their digest, for the comparison with the other installation.
    out.push({ ...v, served });
  }
  return out;
}

/** A GET's status and JSON answer, without the request id (which names this request only). */
async function seen(s: RunningServer, path: string): Promise<{ status: number; json: Json }> {
  const r = await call(s, 'GET', path);
  const { requestId: _requestId, ...json } = (r.json ?? {}) as Record<string, unknown>;
  return { status: r.status, json };
}

/** A copy without `ageSeconds` (a lock's age: the time of reading less its `createdAt`). */
function ageless(value: Json): Json {
  if (Array.isArray(value)) return value.map(ageless);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value as Record<string, unknown>)
      .filter(([k]) => k !== 'ageSeconds')
      .map(([k, v]) => [k, ageless(v)]),
  );
}

/** Everything an installation holds, as the API shows it to bootstrap-admin (locks' ages aside). */
async function snapshot(s: RunningServer, made: Made): Promise<Record<string, unknown>> {
  const units: Record<string, unknown> = {};
  const listed = (await pages(s, '/v1/units?limit=3')) as { name: string }[];
  for (const { name } of listed) {
    const detail = (await ok(s, 'GET', `/v1/units/${enc(name)}`, 200)).json;
    const workspaces: Record<string, unknown> = {};
    for (const w of detail.workspaces as { workspace: string; deleted: boolean }[]) {
      const q = `?workspace=${enc(w.workspace)}`;
      workspaces[w.workspace] = {
        versions: await versionsOf(s, name, w.workspace),
        outputs: w.deleted ? null : await seen(s, `/v1/units/${enc(name)}/outputs${q}`),
        lock: await seen(s, `/v1/units/${enc(name)}/lock${q}`),
        status: (await ok(s, 'GET', `/v1/units/${enc(name)}/status${q}`, 200)).json,
      };
    }
    units[name] = { detail, workspaces };
  }
  for (const name of made.deleted) {
    units[name] = {
      detail: await seen(s, `/v1/units/${enc(name)}`),
      workspaces: { default: { versions: await versionsOf(s, name, 'default') } },
    };
  }
  return ageless({
    units,
    locks: (await ok(s, 'GET', '/v1/locks', 200)).json,
    rbac: {
      status: (await ok(s, 'GET', '/v1/rbac/status', 200)).json,
      permissions: (await ok(s, 'GET', '/v1/rbac/permissions', 200)).json,
      roles: (await ok(s, 'GET', '/v1/rbac/roles', 200)).json,
      assignments: (await ok(s, 'GET', '/v1/rbac/assignments', 200)).json,
    },
    tokens: (await ok(s, 'GET', '/v1/auth/tokens', 200)).json,
    graph: (await ok(s, 'GET', '/v1/graph', 200)).json,
    stale: (await ok(s, 'GET', '/v1/graph/stale', 200)).json,
  });
}

async function auditLog(s: RunningServer): Promise<Json[]> {
  return pages(s, '/v1/audit?limit=1000');
}

/**
 * The restore holds what the original held at the backup: the same snapshot, every audit event
 * the original had by then, and what was minted before the backup still works.
 */
async function expectRestored(
  restored: RunningServer,
  before: Record<string, unknown>,
  auditBefore: Json[],
  made: Made,
): Promise<void> {
  const after = await snapshot(restored, made);
  expect(Object.keys(after.units as object).sort()).toEqual(
    Object.keys(before.units as object).sort(),
  );
  expect(after).toEqual(before);
  // The drill compared something: the fixtures are all there.
  const units = before.units as Record<string, Json>;
  expect(Object.keys(units)).toEqual(
    expect.arrayContaining(['team/network', 'team/app', 'team/big', 'team/secret', 'team/s3']),
  );
  expect(units['team/network'].workspaces.default.versions).toHaveLength(4);
  expect(units['team/old'].workspaces.default.versions).toHaveLength(1);
  expect((before.graph as { edges: unknown[] }).edges).toHaveLength(2);
  expect((before.locks as unknown[]).length).toBe(1);
  expect((before.tokens as unknown[]).length).toBeGreaterThanOrEqual(2);

  const audit = new Map((await auditLog(restored)).map((e) => [e.id as string, e]));
  expect(auditBefore.length).toBeGreaterThan(10);
  expect(auditBefore.filter((e) => !audit.has(e.id))).toEqual([]);
  for (const e of auditBefore) expect(audit.get(e.id)).toEqual(e);

  // What was minted before the backup: the API token (and its revoked sibling), the S3
  // credentials derived from it (their HMAC secret is in the database), the pipeline's lock.
  const me = await ok(restored, 'GET', '/v1/auth/me', 200, { token: made.ciToken });
  expect(me.json.subject).toBe('svc:ci');
  expect((await call(restored, 'GET', '/v1/auth/me', { token: made.revokedToken })).status).toBe(
    401,
  );
  const client = s3ClientFor(restored, made.s3Creds);
  try {
    const got = await client.send(
      new GetObjectCommand({ Bucket: 'tfstate', Key: 'team/s3/terraform.tfstate' }),
    );
    expect(Buffer.from(await got.Body!.transformToByteArray()).equals(made.s3Body)).toBe(true);
  } finally {
    client.destroy();
  }
  const lockPath = `/v1/units/${enc(made.lock.unit)}/lock`;
  await ok(restored, 'DELETE', `${lockPath}?id=${enc(made.lock.ID)}`, 204, {
    token: made.ciToken,
  });
  expect((await call(restored, 'GET', lockPath)).status).toBe(404);
  // Terraform carries on where the backup left off: its next serial is accepted.
  await ok(restored, 'POST', '/v1/backend/team/network', 200, {
    raw: tfstate(made.network.lineage, made.network.serial + 1, { vpc_id: 'vpc-next' }),
  });
}

// ------------------------------------------------------------------ PostgreSQL

/** Files below `dir`, as paths relative to it (the blob keys of an `fs` store). */
function filesBelow(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else out.push(relative(dir, p));
    }
  };
  if (existsSync(dir)) walk(dir);
  return out.sort();
}

async function blobKeysNamed(databaseUrl: string): Promise<string[]> {
  const c = new Client({ connectionString: databaseUrl });
  await c.connect();
  try {
    const r = await c.query<{ blob_key: string }>(
      'SELECT DISTINCT blob_key FROM versions ORDER BY 1',
    );
    return r.rows.map((row) => row.blob_key);
  } finally {
    await c.end();
  }
}

const describeOnPostgres = ON_POSTGRES ? describe : describe.skip;
const PG_SUITE = 'backup and restore drill on PostgreSQL (pg_dump, the README blocks)';
const PG_NA = `${PG_SUITE} — needs PostgreSQL: run via scripts/with-postgres.sh`;
if (!ON_POSTGRES) console.warn(`backup-restore.spec.ts: skipped (not applicable): ${PG_NA}`);

describeOnPostgres(ON_POSTGRES ? PG_SUITE : PG_NA, () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  const servers: RunningServer[] = [];

  beforeAll(() => {
    for (const tool of ['pg_dump', 'pg_restore', 'psql', 'tar']) {
      if (!onPath(tool)) {
        throw new Error(`${tool} is not on the PATH: the backup drill runs the README's commands`);
      }
    }
  });

  afterAll(async () => {
    for (const s of servers) await s.stop();
    for (const c of cleanups.reverse()) await c();
  });

  /** An empty database and a scratch directory for one installation. */
  async function emptyInstallation(storage: 'fs' | 'postgres'): Promise<{
    settings: Record<string, string>;
    start: () => Promise<RunningServer>;
  }> {
    const db = await freshPostgresDatabase();
    const dir = mkdtempSync(join(tmpdir(), 'statehouse-drill-'));
    cleanups.push(db.drop, () => rmSync(dir, { recursive: true, force: true }));
    const settings: Record<string, string> = {
      DATABASE_URL: db.url,
      STATEHOUSE_STORAGE: storage,
      ...(storage === 'fs' ? { STATEHOUSE_STORAGE_FS_DIR: join(dir, 'blobs') } : {}),
    };
    return {
      settings,
      start: async () => {
        const s = await spawnServer({ ...settings, STATEHOUSE_DATA_DIR: join(dir, 'data') });
        servers.push(s);
        return s;
      },
    };
  }

  function backupDir(): string {
    const dir = mkdtempSync(join(tmpdir(), 'statehouse-backup-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    return dir;
  }

  it('fs blobs: pg_dump, then the blob directory, while serving; the restore holds exactly what the dump did', async () => {
    const source = await emptyInstallation('fs');
    const a = await source.start();
    const made = await populate(a);
    const before = await snapshot(a, made);
    const auditBefore = await auditLog(a);

    const backup = backupDir();
    await step(STEP.dump, backup, source.settings);
    // Written after the dump began, before the blobs were copied: in the blob copy, in no row.
    await ok(a, 'POST', '/v1/backend/late/after-dump', 200, {
      raw: tfstate(randomUUID(), 1, { late: 'yes' }),
    });
    await ok(a, 'POST', '/v1/backend/team/network', 200, {
      raw: tfstate(made.network.lineage, made.network.serial + 1, { vpc_id: 'vpc-late' }),
    });
    await step(STEP.copyBlobs, backup, source.settings);

    const target = await emptyInstallation('fs');
    await step(STEP.restoreDatabase, backup, target.settings);
    await step(STEP.restoreBlobs, backup, target.settings);
    // The blob copy is newer than the dump: its extra blobs are there, named by no row.
    const onDisk = filesBelow(target.settings.STATEHOUSE_STORAGE_FS_DIR);
    const named = await blobKeysNamed(target.settings.DATABASE_URL);
    expect(named.filter((k) => !onDisk.includes(k))).toEqual([]);
    expect(onDisk.filter((k) => !named.includes(k))).toHaveLength(2);

    const b = await target.start();
    expect((await call(b, 'GET', '/v1/backend/late/after-dump')).status).toBe(404);
    await expectRestored(b, before, auditBefore, made);
  });

  it('postgres blobs: the dump alone holds the blobs (chunk rows); the restore holds exactly what the dump did', async () => {
    const source = await emptyInstallation('postgres');
    const a = await source.start();
    const made = await populate(a);
    const before = await snapshot(a, made);
    const auditBefore = await auditLog(a);

    const backup = backupDir();
    await step(STEP.dump, backup, source.settings);
    await ok(a, 'POST', '/v1/backend/late/after-dump', 200, {
      raw: tfstate(randomUUID(), 1, { late: 'yes' }),
    });

    const target = await emptyInstallation('postgres');
    await step(STEP.restoreDatabase, backup, target.settings);
    const b = await target.start();
    expect((await call(b, 'GET', '/v1/backend/late/after-dump')).status).toBe(404);
    await expectRestored(b, before, auditBefore, made);
  });

  it('a blob copy older than the dump: the check after the restore names the missing blob, and its version answers 500 blob_unreadable, never 404', async () => {
    const source = await emptyInstallation('fs');
    const a = await source.start();
    const lineage = randomUUID();
    await ok(a, 'POST', '/v1/backend/team/network', 200, {
      raw: tfstate(lineage, 1, { vpc_id: 'vpc-1' }),
    });
    const backup = backupDir();
    // The wrong order: the blobs first, then a write, then the dump.
    await step(STEP.copyBlobs, backup, source.settings);
    await ok(a, 'POST', '/v1/backend/team/network', 200, {
      raw: tfstate(lineage, 2, { vpc_id: 'vpc-2' }),
    });
    await step(STEP.dump, backup, source.settings);

    const target = await emptyInstallation('fs');
    await step(STEP.restoreDatabase, backup, target.settings);
    const check = await runStep(STEP.restoreBlobs, backup, target.settings);
    expect(check.code).toBe(1);
    const onDisk = filesBelow(target.settings.STATEHOUSE_STORAGE_FS_DIR);
    const lost = (await blobKeysNamed(target.settings.DATABASE_URL)).filter(
      (k) => !onDisk.includes(k),
    );
    expect(lost).toHaveLength(1);
    expect(check.output).toContain(`blobs missing from the backup: ${lost[0]}`);

    // Started anyway: the state whose bytes are missing is an error, not "no state yet".
    const b = await target.start();
    const current = await call(b, 'GET', '/v1/backend/team/network');
    expect(current.status).toBe(500);
    expect(current.json.code).toBe('blob_unreadable');
    const first = await call(b, 'GET', `/v1/units/${enc('team/network')}/versions/1`);
    expect(first.status).toBe(200);
    expect(JSON.parse(first.text).outputs.vpc_id.value).toBe('vpc-1');
  });
});

// ------------------------------------------------------------------ the embedded database

const describeEmbedded = ON_POSTGRES ? describe.skip : describe;
const EMBEDDED_SUITE =
  'backup and restore drill on the embedded database (the stopped data directory)';
const EMBEDDED_NA = `${EMBEDDED_SUITE} — runs without DATABASE_URL (npm test)`;
if (ON_POSTGRES) console.warn(`backup-restore.spec.ts: skipped (not applicable): ${EMBEDDED_NA}`);

describeEmbedded(ON_POSTGRES ? EMBEDDED_NA : EMBEDDED_SUITE, () => {
  const dirs: string[] = [];
  const servers: RunningServer[] = [];

  afterAll(async () => {
    for (const s of servers) await s.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('the data directory copied with the server stopped, restored into an empty one, holds everything', async () => {
    for (const tool of ['tar', 'gzip']) {
      if (!onPath(tool))
        throw new Error(`${tool} is not on the PATH: the drill runs the README's commands`);
    }
    const dataDir = freshDataDir();
    const backup = mkdtempSync(join(tmpdir(), 'statehouse-backup-'));
    const restoredDir = join(mkdtempSync(join(tmpdir(), 'statehouse-restored-')), 'data');
    dirs.push(dataDir, backup, join(restoredDir, '..'));

    const a = await spawnServer({ STATEHOUSE_DATA_DIR: dataDir });
    servers.push(a);
    const made = await populate(a);
    const before = await snapshot(a, made);
    const auditBefore = await auditLog(a);
    await a.stop();

    await step(STEP.embeddedBackup, backup, { STATEHOUSE_DATA_DIR: dataDir });
    await step(STEP.embeddedRestore, backup, { STATEHOUSE_DATA_DIR: restoredDir });
    expect(existsSync(join(restoredDir, 'statehouse.lock'))).toBe(false);

    const b = await spawnServer({ STATEHOUSE_DATA_DIR: restoredDir });
    servers.push(b);
    await expectRestored(b, before, auditBefore, made);
  });
});
