/**
 * RBAC enforced the same through every door, against the real `statehouse serve` process over
 * real sockets: the S3 door (`/s3`, requests signed here with SigV4 using credentials from
 * `POST /v1/auth/issue-s3-creds`), Terraform's HTTP backend (`/v1/backend/<unit…>`) and the
 * management API (`/v1/…`).
 *
 * One server; RBAC initialised with `svc:admin` as admin, and one service principal per role:
 *
 * | principal        | rules                                                                  |
 * |------------------|------------------------------------------------------------------------|
 * | svc:admin        | the `admin` role of init (every action on `**`)                        |
 * | svc:reader       | allow unit.read on team/**                                             |
 * | svc:writer       | allow unit.read, unit.write, unit.lock on team/**                       |
 * | svc:locker       | allow unit.lock on team/**                                             |
 * | svc:outputs      | allow outputs.read on shared/net                                       |
 * | svc:outputs-sens | allow outputs.read, outputs.read-sensitive on shared/net               |
 * | svc:prod-writer  | allow unit.read, unit.write on * /prod, only in workspace prod         |
 * | svc:denied       | allow unit.read, unit.write, unit.lock on team/**; deny them on team/secret |
 * | svc:nobody       | no assignment                                                          |
 * | svc:team-c       | allow unit.read, unit.write, unit.delete, unit.purge on team-c/**; deny them on team-c/app in workspace prod |
 * | svc:reader-secret | the `reader` role of init; deny unit.read on team/secret              |
 * | svc:history-outputs | allow outputs.read, version.read on shared/net                      |
 * | svc:restorer     | allow version.restore on team/**                                       |
 * | svc:restorer-no-write | allow version.restore, unit.read, unit.write on team/**; deny unit.write on team/secret |
 *
 * The DENIED table drives each door × each operation × principal × name (existing or not) and
 * checks the door's own 403 (JSON on the API and the HTTP backend, S3 XML `AccessDenied`, no body
 * on HEAD) and that nothing changed (units, versions, lock — read through the bootstrap token).
 * The ALLOWED_READS table and the scenarios after it check what each principal may do, and that
 * it took effect.
 */
import { createHash, createHmac, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { IncomingHttpHeaders, request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { freshServerEnv } from '../support/database';
import { FIXTURES } from '../support/paths';
import { RunningServer, spawnServer } from '../support/server';
import { nullResource, tfStateText } from '../support/tf-state';

jest.setTimeout(180_000);

const BUCKET = 'tfstate';
const REGION = 'us-east-1';
const SIMPLE = readFileSync(join(FIXTURES, 'simple.tfstate'));
const SIMPLE_SECRET = 's3cr3t-not-real'; // the sensitive output of simple.tfstate

// ------------------------------------------------------------------------------------ wire

interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  text: string;
}

interface Creds {
  AccessKeyId: string;
  SecretAccessKey: string;
  SessionToken: string;
}

const sha256Hex = (b: Buffer | string): string => createHash('sha256').update(b).digest('hex');
const md5Hex = (b: Buffer | string): string => createHash('md5').update(b).digest('hex');
const hmac = (key: Buffer | string, data: string): Buffer =>
  createHmac('sha256', key).update(data, 'utf8').digest();

function rfc3986(s: string): string {
  return encodeURIComponent(s).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

let server: RunningServer;

function send(
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: Buffer | string,
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const h = { ...headers };
    const b = body === undefined ? undefined : Buffer.isBuffer(body) ? body : Buffer.from(body);
    if (b !== undefined) h['content-length'] = String(b.length);
    const req = httpRequest(
      { host: '127.0.0.1', port: server.port, method, path, headers: h, agent: false },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const all = Buffer.concat(parts);
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: all,
            text: all.toString('utf8'),
          });
        });
      },
    );
    req.on('error', reject);
    req.end(b);
  });
}

/** SigV4-signed S3 request (header auth, signed payload). `path` is sent and signed as is. */
function s3(
  creds: Creds,
  method: string,
  path: string,
  opts: { query?: string; body?: Buffer; headers?: Record<string, string> } = {},
): Promise<Reply> {
  const amzDate = new Date()
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}Z$/, 'Z');
  const date = amzDate.slice(0, 8);
  const scope = `${date}/${REGION}/s3/aws4_request`;
  const headers: Record<string, string> = {
    host: `127.0.0.1:${server.port}`,
    'x-amz-date': amzDate,
    'x-amz-content-sha256': sha256Hex(opts.body ?? Buffer.alloc(0)),
    'x-amz-security-token': creds.SessionToken,
    ...opts.headers,
  };
  const query = opts.query ?? '';
  const canonicalQuery = query
    .split('&')
    .filter((p) => p !== '')
    .map((p) => {
      const i = p.indexOf('=');
      const dec = (s: string) => decodeURIComponent(s);
      return [rfc3986(dec(i < 0 ? p : p.slice(0, i))), rfc3986(dec(i < 0 ? '' : p.slice(i + 1)))];
    })
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : 1))
    .map(([n, v]) => `${n}=${v}`)
    .join('&');
  const names = Object.keys(headers).sort();
  const canonical = [
    method,
    path,
    canonicalQuery,
    names.map((n) => `${n}:${headers[n].trim()}\n`).join(''),
    names.join(';'),
    headers['x-amz-content-sha256'],
  ].join('\n');
  const key = hmac(
    hmac(hmac(hmac(`AWS4${creds.SecretAccessKey}`, date), REGION), 's3'),
    'aws4_request',
  );
  const signature = hmac(
    key,
    `AWS4-HMAC-SHA256\n${amzDate}\n${scope}\n${sha256Hex(canonical)}`,
  ).toString('hex');
  headers.authorization = `AWS4-HMAC-SHA256 Credential=${creds.AccessKeyId}/${scope}, SignedHeaders=${names.join(';')}, Signature=${signature}`;
  return send(method, query === '' ? path : `${path}?${query}`, headers, opts.body);
}

// ------------------------------------------------------------------------------------ principals

type Who =
  | 'admin'
  | 'reader'
  | 'writer'
  | 'locker'
  | 'outputs'
  | 'outputsSens'
  | 'prodWriter'
  | 'denied'
  | 'nobody'
  | 'teamC'
  | 'readerSecret'
  | 'historyOutputs'
  | 'restorer'
  | 'restorerNoWrite';

const SUBJECT: Record<Who, string> = {
  admin: 'svc:admin',
  reader: 'svc:reader',
  writer: 'svc:writer',
  locker: 'svc:locker',
  outputs: 'svc:outputs',
  outputsSens: 'svc:outputs-sens',
  prodWriter: 'svc:prod-writer',
  denied: 'svc:denied',
  nobody: 'svc:nobody',
  teamC: 'svc:team-c',
  readerSecret: 'svc:reader-secret',
  historyOutputs: 'svc:history-outputs',
  restorer: 'svc:restorer',
  restorerNoWrite: 'svc:restorer-no-write',
};

interface Identity {
  token: string;
  creds: Creds;
}
const ids = {} as Record<Who, Identity>;

const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });

/** A management-API call with a JSON body (or none). */
async function api(
  token: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<Reply & { json: () => Record<string, unknown> }> {
  const r = await send(
    method,
    path,
    {
      ...bearer(token),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  );
  return { ...r, json: () => JSON.parse(r.text) as Record<string, unknown> };
}

const root = (): string => server.token; // bootstrap-admin: break glass, unaffected by the rules

// ------------------------------------------------------------------------------------ states

const enc = encodeURIComponent;

function tfState(serial: number, lineage: string, outputs: Record<string, string> = {}): string {
  return tfStateText({ serial, lineage, outputs, resources: [nullResource('resource-id-1')] });
}

const lineageOf = (unit: string): string => `lineage-${unit.replace(/\//g, '-')}`;

/** The next state Terraform would write for (unit, workspace): the current serial + 1. */
async function nextState(unit: string, workspace = 'default'): Promise<string> {
  const r = await api(
    root(),
    'GET',
    `/v1/units/${enc(unit)}/versions?workspace=${workspace}&limit=1`,
  );
  const items = r.status === 200 ? (r.json().items as { serial: number }[]) : [];
  const serial = items.length > 0 ? items[0].serial + 1 : 1;
  return tfState(serial, lineageOf(unit), { name: unit });
}

function lockInfo(id: string, who = 'matrix@e2e'): string {
  return `{"ID":"${id}","Operation":"OperationTypeApply","Info":"","Who":"${who}","Version":"1.11.4","Created":"2026-01-02T03:04:05.123456789Z","Path":""}`;
}

const backendPath = (unit: string, workspace: string, query = ''): string => {
  const q = [workspace === 'default' ? '' : `workspace=${workspace}`, query]
    .filter((s) => s !== '')
    .join('&');
  return `/v1/backend/${unit}${q === '' ? '' : `?${q}`}`;
};

const s3Key = (unit: string, workspace: string): string =>
  workspace === 'default'
    ? `${unit}/terraform.tfstate`
    : `env:/${workspace}/${unit}/terraform.tfstate`;
const s3Path = (key: string): string => `/s3/${BUCKET}/${key.split('/').map(rfc3986).join('/')}`;

const unitPath = (unit: string, rest = '', workspace = 'default', extra = ''): string =>
  `/v1/units/${enc(unit)}${rest}?workspace=${workspace}${extra}`;

/** The lock ID held on team/locked by svc:locker, for the whole file. */
const HELD_ID = 'held-by-locker';
const heldIdOf = (unit: string): string => (unit === 'team/locked' ? HELD_ID : 'no-such-lock');

// ------------------------------------------------------------------------------------ operations

type Door = 'http' | 's3' | 'api';

interface Op {
  door: Door;
  run: (who: Identity, unit: string, workspace: string) => Promise<Reply>;
}

/** Keeps the operation names as a type while every value is an Op. */
const defineOps = <K extends string>(ops: Record<K, Op>): Record<K, Op> => ops;

const OPS = defineOps({
  // Terraform HTTP backend
  'http GET': { door: 'http', run: (w, u, ws) => send('GET', backendPath(u, ws), bearer(w.token)) },
  'http HEAD': {
    door: 'http',
    run: (w, u, ws) => send('HEAD', backendPath(u, ws), bearer(w.token)),
  },
  'http POST': {
    door: 'http',
    run: async (w, u, ws) =>
      send(
        'POST',
        backendPath(u, ws),
        { ...bearer(w.token), 'content-type': 'application/json' },
        await nextState(u, ws),
      ),
  },
  'http DELETE': {
    door: 'http',
    run: (w, u, ws) => send('DELETE', backendPath(u, ws), bearer(w.token)),
  },
  'http LOCK': {
    door: 'http',
    run: (w, u, ws) => send('LOCK', backendPath(u, ws), bearer(w.token), lockInfo(randomUUID())),
  },
  'http UNLOCK': {
    door: 'http',
    run: (w, u, ws) => send('UNLOCK', backendPath(u, ws), bearer(w.token), lockInfo(heldIdOf(u))),
  },
  'http force-unlock': {
    door: 'http',
    run: (w, u, ws) => send('UNLOCK', backendPath(u, ws), bearer(w.token)),
  },
  // S3 door
  's3 GetObject': { door: 's3', run: (w, u, ws) => s3(w.creds, 'GET', s3Path(s3Key(u, ws))) },
  's3 HeadObject': { door: 's3', run: (w, u, ws) => s3(w.creds, 'HEAD', s3Path(s3Key(u, ws))) },
  's3 PutObject': {
    door: 's3',
    run: async (w, u, ws) =>
      s3(w.creds, 'PUT', s3Path(s3Key(u, ws)), {
        body: Buffer.from(await nextState(u, ws)),
        headers: { 'content-type': 'application/json' },
      }),
  },
  's3 DeleteObject': { door: 's3', run: (w, u, ws) => s3(w.creds, 'DELETE', s3Path(s3Key(u, ws))) },
  's3 PutLock': {
    door: 's3',
    run: (w, u, ws) =>
      s3(w.creds, 'PUT', s3Path(`${s3Key(u, ws)}.tflock`), {
        body: Buffer.from(lockInfo(randomUUID())),
        headers: { 'if-none-match': '*', 'content-type': 'application/json' },
      }),
  },
  's3 GetLock': {
    door: 's3',
    run: (w, u, ws) => s3(w.creds, 'GET', s3Path(`${s3Key(u, ws)}.tflock`)),
  },
  's3 DeleteLock': {
    door: 's3',
    run: (w, u, ws) => s3(w.creds, 'DELETE', s3Path(`${s3Key(u, ws)}.tflock`)),
  },
  // management API
  'api GET unit': { door: 'api', run: (w, u, ws) => api(w.token, 'GET', unitPath(u, '', ws)) },
  'api GET state': {
    door: 'api',
    run: (w, u, ws) => api(w.token, 'GET', unitPath(u, '/state', ws)),
  },
  'api PUT state': {
    door: 'api',
    run: async (w, u, ws) => api(w.token, 'PUT', unitPath(u, '/state', ws), await nextState(u, ws)),
  },
  'api DELETE state': {
    door: 'api',
    run: (w, u, ws) => api(w.token, 'DELETE', unitPath(u, '/state', ws)),
  },
  'api GET outputs': {
    door: 'api',
    run: (w, u, ws) => api(w.token, 'GET', unitPath(u, '/outputs', ws)),
  },
  'api versions': {
    door: 'api',
    run: (w, u, ws) => api(w.token, 'GET', unitPath(u, '/versions', ws)),
  },
  'api version 1': {
    door: 'api',
    run: (w, u, ws) => api(w.token, 'GET', unitPath(u, '/versions/1', ws)),
  },
  'api restore 1': {
    door: 'api',
    run: (w, u, ws) => api(w.token, 'POST', unitPath(u, '/versions/1/restore', ws)),
  },
  'api undelete': {
    door: 'api',
    run: (w, u) => api(w.token, 'POST', `/v1/units/${enc(u)}/undelete`),
  },
  'api purge': { door: 'api', run: (w, u) => api(w.token, 'POST', `/v1/units/${enc(u)}/purge`) },
  'api DELETE unit': { door: 'api', run: (w, u) => api(w.token, 'DELETE', `/v1/units/${enc(u)}`) },
  'api GET lock': { door: 'api', run: (w, u, ws) => api(w.token, 'GET', unitPath(u, '/lock', ws)) },
  'api POST lock': {
    door: 'api',
    run: (w, u, ws) => api(w.token, 'POST', unitPath(u, '/lock', ws), lockInfo(randomUUID())),
  },
  'api DELETE lock': {
    door: 'api',
    run: (w, u, ws) => api(w.token, 'DELETE', unitPath(u, '/lock', ws, `&id=${heldIdOf(u)}`)),
  },
  'api force-unlock': {
    door: 'api',
    run: (w, u, ws) => api(w.token, 'POST', unitPath(u, '/force-unlock', ws)),
  },
});
type OpName = keyof typeof OPS;

const READS: OpName[] = [
  'http GET',
  'http HEAD',
  's3 GetObject',
  's3 HeadObject',
  'api GET unit',
  'api GET state',
  'api GET outputs',
];
const LOCK_READS: OpName[] = ['s3 GetLock', 'api GET lock'];
const WRITES: OpName[] = [
  'http POST',
  'http DELETE',
  's3 PutObject',
  's3 DeleteObject',
  'api PUT state',
  'api DELETE state',
];
const LOCKING: OpName[] = [
  'http LOCK',
  'http UNLOCK',
  's3 PutLock',
  's3 DeleteLock',
  'api POST lock',
  'api DELETE lock',
];
const ADMIN_OPS: OpName[] = [
  'http force-unlock',
  'api force-unlock',
  'api versions',
  'api version 1',
  'api restore 1',
  'api undelete',
  'api purge',
  'api DELETE unit',
];
/** Operations that create a unit that does not exist yet (needing unit.create). */
const CREATING: OpName[] = [
  'http POST',
  's3 PutObject',
  'api PUT state',
  'http LOCK',
  's3 PutLock',
  'api POST lock',
];

// ------------------------------------------------------------------------------------ checks

/** The door's own 403: JSON `forbidden` (API, HTTP backend), S3 XML `AccessDenied`; no body on HEAD. */
function expectForbidden(door: Door, method: string, r: Reply): void {
  expect({ status: r.status, body: r.status === 403 ? 'ok' : r.text.slice(0, 300) }).toEqual({
    status: 403,
    body: 'ok',
  });
  if (method === 'HEAD') {
    expect(r.body.length).toBe(0);
    return;
  }
  if (door === 's3') {
    expect(r.headers['content-type']).toMatch(/^application\/xml/);
    expect(r.text).toMatch(/<Error><Code>AccessDenied<\/Code><Message>[^<]+<\/Message>/);
    expect(r.headers['x-amz-request-id']).toEqual(expect.any(String));
  } else {
    expect(r.headers['content-type']).toMatch(/^application\/json/);
    const body = JSON.parse(r.text) as Record<string, unknown>;
    expect(body).toMatchObject({ statusCode: 403, code: 'forbidden' });
    expect(body.message).toMatch(/^svc:[a-z-]+ may not [a-z.-]+ on /);
  }
}

const methodOf = (op: OpName): string =>
  op.endsWith('HEAD') || op.endsWith('HeadObject') ? 'HEAD' : 'GET';

/**
 * Everything a request could have changed about (unit, workspace), read with the bootstrap
 * token: the unit list, the unit (workspaces, current versions, deleted flags), its versions and
 * its lock.
 */
async function snapshot(unit: string, workspace: string): Promise<unknown> {
  const units = await api(root(), 'GET', '/v1/units?limit=1000');
  const one = await api(root(), 'GET', `/v1/units/${enc(unit)}`);
  const versions = await api(root(), 'GET', unitPath(unit, '/versions', workspace));
  const lock = await api(root(), 'GET', unitPath(unit, '/lock', workspace));
  const body = (r: Reply & { json: () => Record<string, unknown> }) =>
    r.status === 200 ? r.json() : r.status;
  const lockBody = body(lock);
  if (typeof lockBody === 'object') delete lockBody.ageSeconds;
  return {
    units: (units.json().items as { name: string; deletedAt: string | null }[]).map(
      (u) => `${u.name}${u.deletedAt ? ' (deleted)' : ''}`,
    ),
    unit: body(one),
    versions: body(versions),
    lock: lockBody,
  };
}

async function versionCount(unit: string, workspace = 'default'): Promise<number> {
  const r = await api(root(), 'GET', unitPath(unit, '/versions', workspace, '&limit=1000'));
  expect(r.status).toBe(200);
  return (r.json().items as unknown[]).length;
}

async function lockHolder(unit: string, workspace = 'default'): Promise<string | null> {
  const r = await api(root(), 'GET', unitPath(unit, '/lock', workspace));
  if (r.status === 404) return null;
  expect(r.status).toBe(200);
  return r.json().principal as string;
}

/** The current state's bytes, as the bootstrap admin reads them. */
async function stored(unit: string, workspace = 'default'): Promise<Reply> {
  return send('GET', unitPath(unit, '/state', workspace), bearer(root()));
}

const keysOf = (xml: string): string[] =>
  [...xml.matchAll(/<Key>([^<]*)<\/Key>/g)].map((m) => m[1].replace(/&amp;/g, '&'));

// ------------------------------------------------------------------------------------ the tables

interface Row {
  op: OpName;
  who: Who;
  unit: string;
  workspace: string;
}
function cross(who: Who[], ops: OpName[], targets: (string | [string, string])[]): Row[] {
  const rows: Row[] = [];
  for (const w of who)
    for (const op of ops)
      for (const t of targets) {
        const [unit, workspace] = typeof t === 'string' ? [t, 'default'] : t;
        rows.push({ op, who: w, unit, workspace });
      }
  return rows;
}

/**
 * Requests that must be refused with the door's 403 and change nothing. `…/ghost` names have no
 * unit: the answer is the same 403 as for an existing one (existence does not leak).
 */
const DENIED: Row[] = [
  // no assignment at all: nothing, anywhere
  ...cross(['nobody'], [...READS, ...WRITES], ['team/app', 'team/ghost', 'hidden/vault']),
  ...cross(['nobody'], [...LOCK_READS, ...LOCKING, ...ADMIN_OPS], ['team/locked', 'team/ghost']),
  // unit.read on team/**: no writing, locking or admin; nothing outside team/
  ...cross(['reader'], [...WRITES, ...LOCKING, ...ADMIN_OPS], ['team/locked', 'team/ghost']),
  ...cross(['reader'], [...READS, ...LOCK_READS], ['hidden/vault', 'hidden/ghost']),
  // read + write + lock on team/**: no force-unlock, versions, restore, delete or purge …
  ...cross(['writer'], ADMIN_OPS, ['team/locked']),
  // … nothing outside team/ …
  ...cross(['writer'], [...READS, ...WRITES, ...LOCKING], ['hidden/vault', 'hidden/ghost']),
  // … and no unit.create: a write or a lock cannot bring a new unit into being
  ...cross(['writer'], CREATING, ['team/ghost']),
  // unit.lock only: no reading, no writing (not even while holding the lock)
  ...cross(['locker'], [...READS, ...LOCK_READS, ...WRITES], ['team/app', 'team/locked']),
  ...cross(['locker'], ['http LOCK', 'http force-unlock', 's3 DeleteLock'], ['hidden/vault']),
  // its own lock: a force-unlock still needs unit.force-unlock
  ...cross(['locker'], ['http force-unlock', 'api force-unlock'], ['team/locked']),
  // outputs.read on shared/net: the outputs-only state, but no full read, writing or locking
  ...cross(
    ['outputs', 'outputsSens'],
    [...WRITES, ...LOCKING, 'api GET unit', 'api GET state', 'api versions', ...LOCK_READS],
    ['shared/net'],
  ),
  ...cross(['outputs'], READS, ['team/app', 'shared/ghost-net']),
  // unit.read + unit.write on */prod, only in workspace prod
  // (GET unit is not per workspace: it shows the unit with the workspaces it may read — below)
  ...cross(
    ['prodWriter'],
    [...READS.filter((op) => op !== 'api GET unit'), ...WRITES],
    [['app/prod', 'default']],
  ),
  ...cross(
    ['prodWriter'],
    [...READS, ...WRITES],
    [
      ['team/app', 'prod'],
      ['app/test', 'prod'],
    ],
  ),
  ...cross(
    ['prodWriter'],
    ['http LOCK', 's3 PutLock', 'api POST lock', 'api versions'],
    [['app/prod', 'prod']],
  ),
  // team/** allowed, team/secret denied: the deny wins, for every door
  ...cross(['denied'], [...READS, ...LOCK_READS, ...WRITES, ...LOCKING], ['team/secret']),
];

/**
 * Reads that are allowed (200 with the stored bytes), or that find nothing on a name the caller
 * may read (404 — the only case where a 404 is right).
 */
const ALLOWED_READS: [OpName, Who, string, string, 200 | 404][] = [
  ['http GET', 'reader', 'team/app', 'default', 200],
  ['http HEAD', 'reader', 'team/app', 'default', 200],
  ['s3 GetObject', 'reader', 'team/app', 'default', 200],
  ['s3 HeadObject', 'reader', 'team/app', 'default', 200],
  ['api GET state', 'reader', 'team/app', 'default', 200],
  ['api GET unit', 'reader', 'team/app', 'default', 200],
  ['api GET outputs', 'reader', 'team/app', 'default', 200],
  ['api GET lock', 'reader', 'team/locked', 'default', 200],
  ['s3 GetLock', 'reader', 'team/locked', 'default', 200],
  ['http GET', 'reader', 'team/ghost', 'default', 404],
  ['s3 GetObject', 'reader', 'team/ghost', 'default', 404],
  ['s3 HeadObject', 'reader', 'team/ghost', 'default', 404],
  ['api GET state', 'reader', 'team/ghost', 'default', 404],
  ['http GET', 'writer', 'team/app', 'default', 200],
  ['s3 GetObject', 'writer', 'team/app', 'default', 200],
  ['http GET', 'denied', 'team/app', 'default', 200],
  ['s3 GetObject', 'denied', 'team/app', 'default', 200],
  ['api GET state', 'denied', 'team/app', 'default', 200],
  ['http GET', 'prodWriter', 'app/prod', 'prod', 200],
  ['s3 GetObject', 'prodWriter', 'app/prod', 'prod', 200],
  ['api GET state', 'prodWriter', 'app/prod', 'prod', 200],
  ['api GET unit', 'prodWriter', 'app/prod', 'prod', 200],
  ['http GET', 'admin', 'hidden/vault', 'default', 200],
  ['s3 GetObject', 'admin', 'hidden/vault', 'default', 200],
  ['api GET state', 'admin', 'hidden/vault', 'default', 200],
  ['api versions', 'admin', 'team/app', 'default', 200],
  ['api version 1', 'admin', 'team/app', 'default', 200],
];

// ------------------------------------------------------------------------------------ setup

async function createToken(who: Who): Promise<string> {
  const r = await api(root(), 'POST', '/v1/auth/tokens', {
    name: `matrix ${who}`,
    subject: SUBJECT[who],
  });
  expect(r.status).toBe(201);
  return r.json().token as string;
}

async function issueCreds(token: string): Promise<Creds> {
  const r = await api(token, 'POST', '/v1/auth/issue-s3-creds');
  expect(r.status).toBe(200);
  return r.json() as unknown as Creds;
}

async function seed(
  unit: string,
  workspace = 'default',
  serials = 1,
  body?: Buffer,
): Promise<void> {
  for (let s = 1; s <= serials; s++) {
    const r = await send(
      'POST',
      backendPath(unit, workspace),
      { ...bearer(root()), 'content-type': 'application/json' },
      body ?? tfState(s, lineageOf(unit), { name: unit, serial: String(s) }),
    );
    expect(r.status).toBe(200);
  }
}

async function permission(
  name: string,
  rules: { effect: string; actions: string[]; resources: string[]; workspaces?: string[] }[],
): Promise<void> {
  const admin = ids.admin.token;
  const p = await api(admin, 'POST', '/v1/rbac/permissions', { name, rules });
  expect(p.status).toBe(201);
  const r = await api(admin, 'POST', '/v1/rbac/roles', { name, permissions: [name] });
  expect(r.status).toBe(201);
}

async function assign(role: string, who: Who): Promise<void> {
  const r = await api(ids.admin.token, 'POST', '/v1/rbac/assignments', {
    role,
    subject: SUBJECT[who],
  });
  expect(r.status).toBe(201);
}

describe('RBAC matrix: every door × every action × allowed/denied', () => {
  let cleanup: () => Promise<void>;

  beforeAll(async () => {
    const env = await freshServerEnv();
    cleanup = env.cleanup;
    server = await spawnServer(env.env);

    for (const who of Object.keys(SUBJECT) as Who[]) {
      const token = await createToken(who);
      ids[who] = { token, creds: await issueCreds(token) };
    }

    // Units and states, written by bootstrap-admin before RBAC exists.
    await seed('team/app', 'default', 2);
    for (const u of [
      'team/secret',
      'team/locked',
      'team/del-http',
      'team/del-s3',
      'team/del-api',
      'team/trash',
      'team/restorable',
      'hidden/vault',
      'app/test',
    ])
      await seed(u);
    await seed('team/restorable', 'default', 2);
    await seed('team/restorable-2', 'default', 2);
    await seed('team/secret', 'default', 1); // a second version
    await seed('team-c/app', 'default');
    await seed('team-c/app', 'prod');
    await seed('app/prod', 'default');
    await seed('app/prod', 'prod');
    await seed('shared/net', 'default', 1, SIMPLE);

    const init = await api(root(), 'POST', '/v1/rbac/init', { admin: { subject: 'svc:admin' } });
    expect(init.status).toBe(201);

    await permission('reader-team', [
      { effect: 'allow', actions: ['unit.read'], resources: ['team/**'] },
    ]);
    await permission('writer-team', [
      {
        effect: 'allow',
        actions: ['unit.read', 'unit.write', 'unit.lock'],
        resources: ['team/**'],
      },
    ]);
    await permission('locker-team', [
      { effect: 'allow', actions: ['unit.lock'], resources: ['team/**'] },
    ]);
    await permission('outputs-net', [
      { effect: 'allow', actions: ['outputs.read'], resources: ['shared/net'] },
    ]);
    await permission('outputs-sens-net', [
      {
        effect: 'allow',
        actions: ['outputs.read', 'outputs.read-sensitive'],
        resources: ['shared/net'],
      },
    ]);
    await permission('prod-writer', [
      {
        effect: 'allow',
        actions: ['unit.read', 'unit.write'],
        resources: ['*/prod'],
        workspaces: ['prod'],
      },
    ]);
    await permission('team-but-secret', [
      {
        effect: 'allow',
        actions: ['unit.read', 'unit.write', 'unit.lock'],
        resources: ['team/**'],
      },
      {
        effect: 'deny',
        actions: ['unit.read', 'unit.write', 'unit.lock'],
        resources: ['team/secret'],
      },
    ]);
    await assign('reader-team', 'reader');
    await assign('writer-team', 'writer');
    await assign('locker-team', 'locker');
    await assign('outputs-net', 'outputs');
    await assign('outputs-sens-net', 'outputsSens');
    await assign('prod-writer', 'prodWriter');
    await assign('team-but-secret', 'denied');

    const teamC = ['unit.read', 'unit.write', 'unit.delete', 'unit.purge'];
    await permission('team-c', [
      { effect: 'allow', actions: teamC, resources: ['team-c/**'] },
      { effect: 'deny', actions: teamC, resources: ['team-c/app'], workspaces: ['prod'] },
    ]);
    await assign('team-c', 'teamC');
    await assign('reader', 'readerSecret');
    await permission('no-secret', [
      { effect: 'deny', actions: ['unit.read'], resources: ['team/secret'] },
    ]);
    await assign('no-secret', 'readerSecret');
    await permission('history-outputs', [
      { effect: 'allow', actions: ['outputs.read', 'version.read'], resources: ['shared/net'] },
    ]);
    await assign('history-outputs', 'historyOutputs');
    await permission('restorer', [
      { effect: 'allow', actions: ['version.restore'], resources: ['team/**'] },
    ]);
    await assign('restorer', 'restorer');
    await permission('restorer-no-write', [
      {
        effect: 'allow',
        actions: ['version.restore', 'unit.read', 'unit.write'],
        resources: ['team/**'],
      },
      { effect: 'deny', actions: ['unit.write'], resources: ['team/secret'] },
    ]);
    await assign('restorer-no-write', 'restorerNoWrite');

    // Locks held for the whole file: team/locked by svc:locker, hidden/vault by bootstrap-admin.
    const held = await send(
      'LOCK',
      backendPath('team/locked', 'default'),
      bearer(ids.locker.token),
      lockInfo(HELD_ID, 'locker@e2e'),
    );
    expect(held.status).toBe(200);
    const vault = await send(
      'LOCK',
      backendPath('hidden/vault', 'default'),
      bearer(root()),
      lockInfo('held-by-bootstrap'),
    );
    expect(vault.status).toBe(200);
  });

  afterAll(async () => {
    await server?.stop();
    await cleanup?.();
  });

  describe('denied: the door’s own 403, whether or not the name exists, and nothing changes', () => {
    it('the table is as large as the matrix it describes', () => {
      const doors = new Set(DENIED.map((r) => OPS[r.op].door));
      expect([...doors].sort()).toEqual(['api', 'http', 's3']);
      expect(new Set(DENIED.map((r) => r.op)).size).toBe(Object.keys(OPS).length);
      expect(DENIED.length).toBeGreaterThan(200);
    });

    it.each(
      DENIED.map(
        (r) =>
          [
            `${r.op} by ${SUBJECT[r.who]} on ${r.unit}${r.workspace === 'default' ? '' : ` (workspace ${r.workspace})`}`,
            r,
          ] as const,
      ),
    )('%s → 403', async (_name, row) => {
      const before = await snapshot(row.unit, row.workspace);
      const reply = await OPS[row.op].run(ids[row.who], row.unit, row.workspace);
      expectForbidden(OPS[row.op].door, methodOf(row.op), reply);
      expect(await snapshot(row.unit, row.workspace)).toEqual(before);
    });
  });

  describe('allowed reads (404 only for a name the caller may read)', () => {
    it.each(ALLOWED_READS)('%s by %s on %s (%s) → %d', async (op, who, unit, workspace, status) => {
      const reply = await OPS[op].run(ids[who], unit, workspace);
      expect({ status: reply.status, text: reply.text.slice(0, 200) }).toMatchObject({ status });
      if (status === 404) {
        if (OPS[op].door === 's3' && methodOf(op) !== 'HEAD')
          expect(reply.text).toContain('<Code>NoSuchKey</Code>');
        return;
      }
      if (op === 'api GET unit') {
        const body = JSON.parse(reply.text) as {
          name: string;
          workspaces: { workspace: string }[];
        };
        expect(body).toMatchObject({ name: unit });
        // A reader restricted to workspaces is shown just those.
        if (who === 'prodWriter') expect(body.workspaces.map((w) => w.workspace)).toEqual(['prod']);
        return;
      }
      if (op === 'api GET outputs') {
        expect(JSON.parse(reply.text)).toMatchObject({ outputs: { name: { value: unit } } });
        return;
      }
      if (op === 'api GET lock' || op === 's3 GetLock') {
        expect(reply.text).toContain(HELD_ID);
        return;
      }
      if (op === 'api versions') {
        expect((JSON.parse(reply.text) as { items: unknown[] }).items.length).toBeGreaterThan(0);
        return;
      }
      if (op === 'api version 1') {
        expect(JSON.parse(reply.text)).toMatchObject({ serial: 1 });
        return;
      }
      const full = await stored(unit, workspace);
      expect(full.status).toBe(200);
      if (methodOf(op) === 'HEAD') {
        expect(reply.body.length).toBe(0);
        expect(reply.headers['content-length']).toBe(String(full.body.length));
      } else {
        expect(reply.body.equals(full.body)).toBe(true);
      }
      if (OPS[op].door === 's3') expect(reply.headers.etag).toBe(`"${md5Hex(full.body)}"`);
    });
  });

  describe('writers: lock, write under the lock, unlock — through each door', () => {
    it('HTTP backend: LOCK, POST ?ID=, UNLOCK by svc:writer', async () => {
      const unit = 'team/app';
      const before = await versionCount(unit);
      const id = randomUUID();
      const lock = await send(
        'LOCK',
        backendPath(unit, 'default'),
        bearer(ids.writer.token),
        lockInfo(id),
      );
      expect(lock.status).toBe(200);
      expect(await lockHolder(unit)).toBe('svc:writer');
      const body = await nextState(unit);
      const post = await send(
        'POST',
        backendPath(unit, 'default', `ID=${id}`),
        { ...bearer(ids.writer.token), 'content-type': 'application/json' },
        body,
      );
      expect(post.status).toBe(200);
      expect(await versionCount(unit)).toBe(before + 1);
      expect((await stored(unit)).text).toBe(body);
      const unlock = await send(
        'UNLOCK',
        backendPath(unit, 'default'),
        bearer(ids.writer.token),
        lockInfo(id),
      );
      expect(unlock.status).toBe(200);
      expect(await lockHolder(unit)).toBeNull();
    });

    it('S3: PUT .tflock, PutObject, DELETE .tflock by svc:writer (the holder releases)', async () => {
      const unit = 'team/app';
      const before = await versionCount(unit);
      const w = ids.writer;
      const lock = await OPS['s3 PutLock'].run(w, unit, 'default');
      expect(lock.status).toBe(200);
      expect(await lockHolder(unit)).toBe('svc:writer');
      const read = await OPS['s3 GetLock'].run(w, unit, 'default');
      expect(read.status).toBe(200);
      const put = await OPS['s3 PutObject'].run(w, unit, 'default');
      expect(put.status).toBe(200);
      expect(await versionCount(unit)).toBe(before + 1);
      expect(put.headers.etag).toBe(`"${md5Hex((await stored(unit)).body)}"`);
      const del = await OPS['s3 DeleteLock'].run(w, unit, 'default');
      expect(del.status).toBe(204);
      expect(await lockHolder(unit)).toBeNull();
    });

    it('API: POST /lock, PUT /state?lock_id=, DELETE /lock?id= by svc:writer', async () => {
      const unit = 'team/app';
      const before = await versionCount(unit);
      const w = ids.writer.token;
      const id = randomUUID();
      const lock = await api(w, 'POST', unitPath(unit, '/lock'), lockInfo(id));
      expect(lock.status).toBe(200);
      expect(await lockHolder(unit)).toBe('svc:writer');
      const put = await api(
        w,
        'PUT',
        unitPath(unit, '/state', 'default', `&lock_id=${id}`),
        await nextState(unit),
      );
      expect(put.status).toBe(200);
      expect(await versionCount(unit)).toBe(before + 1);
      const release = await api(w, 'DELETE', unitPath(unit, '/lock', 'default', `&id=${id}`));
      expect(release.status).toBe(204);
      expect(await lockHolder(unit)).toBeNull();
    });

    it('unit.lock alone: svc:locker locks and unlocks through each door, but cannot write while holding the lock', async () => {
      const unit = 'team/app';
      const l = ids.locker;
      const versions = await versionCount(unit);
      // HTTP
      const id = randomUUID();
      expect(
        (await send('LOCK', backendPath(unit, 'default'), bearer(l.token), lockInfo(id))).status,
      ).toBe(200);
      expect(await lockHolder(unit)).toBe('svc:locker');
      const post = await send(
        'POST',
        backendPath(unit, 'default', `ID=${id}`),
        { ...bearer(l.token), 'content-type': 'application/json' },
        await nextState(unit),
      );
      expectForbidden('http', 'POST', post);
      expect(
        (await send('UNLOCK', backendPath(unit, 'default'), bearer(l.token), lockInfo(id))).status,
      ).toBe(200);
      // S3
      expect((await OPS['s3 PutLock'].run(l, unit, 'default')).status).toBe(200);
      expectForbidden('s3', 'PUT', await OPS['s3 PutObject'].run(l, unit, 'default'));
      expect((await OPS['s3 DeleteLock'].run(l, unit, 'default')).status).toBe(204);
      // API
      const id2 = randomUUID();
      expect((await api(l.token, 'POST', unitPath(unit, '/lock'), lockInfo(id2))).status).toBe(200);
      expectForbidden(
        'api',
        'PUT',
        await api(
          l.token,
          'PUT',
          unitPath(unit, '/state', 'default', `&lock_id=${id2}`),
          await nextState(unit),
        ),
      );
      expect(
        (await api(l.token, 'DELETE', unitPath(unit, '/lock', 'default', `&id=${id2}`))).status,
      ).toBe(204);
      expect(await lockHolder(unit)).toBeNull();
      expect(await versionCount(unit)).toBe(versions);
    });

    it('another principal’s lock: svc:writer’s UNLOCK with its ID is refused as not the holder (not a force-unlock)', async () => {
      const r = await OPS['http UNLOCK'].run(ids.writer, 'team/locked', 'default');
      expect(r.status).toBe(409);
      expect(await lockHolder('team/locked')).toBe('svc:locker');
      const a = await OPS['api DELETE lock'].run(ids.writer, 'team/locked', 'default');
      expect(a.status).toBe(409);
      expect(await lockHolder('team/locked')).toBe('svc:locker');
    });
  });

  describe('force-unlock needs unit.force-unlock (svc:admin has it; the writer does not)', () => {
    const takeLock = async (unit: string): Promise<void> => {
      const r = await send(
        'LOCK',
        backendPath(unit, 'default'),
        bearer(ids.writer.token),
        lockInfo(randomUUID()),
      );
      expect(r.status).toBe(200);
      expect(await lockHolder(unit)).toBe('svc:writer');
    };

    it.each([
      ['HTTP backend UNLOCK with an empty body', 'http force-unlock', 200],
      ['S3 DELETE of .tflock by another principal', 's3 DeleteLock', 204],
      ['API POST /force-unlock', 'api force-unlock', 200],
    ] as [string, OpName, number][])('%s', async (_label, op, status) => {
      const unit = 'team/app';
      await takeLock(unit);
      const r = await OPS[op].run(ids.admin, unit, 'default');
      expect(r.status).toBe(status);
      expect(await lockHolder(unit)).toBeNull();
    });
  });

  describe('delete, restore, undelete, purge', () => {
    it.each([
      ['HTTP backend DELETE', 'http DELETE', 'team/del-http', 200],
      ['S3 DeleteObject', 's3 DeleteObject', 'team/del-s3', 204],
      ['API DELETE /state', 'api DELETE state', 'team/del-api', 204],
    ] as [string, OpName, string, number][])(
      '%s of a state by svc:writer (unit.read + unit.write)',
      async (_label, op, unit, status) => {
        const versions = await versionCount(unit);
        const r = await OPS[op].run(ids.writer, unit, 'default');
        expect(r.status).toBe(status);
        expect((await stored(unit)).status).toBe(404);
        expect(await versionCount(unit)).toBe(versions); // soft: history stays
        // and the writer now reads "no state" through the doors (a readable name)
        expect((await OPS['http GET'].run(ids.writer, unit, 'default')).status).toBe(404);
      },
    );

    it('restore: refused to svc:writer, done by svc:admin as a new version with version 1’s bytes', async () => {
      const unit = 'team/restorable';
      const before = await snapshot(unit, 'default');
      expectForbidden('api', 'POST', await OPS['api restore 1'].run(ids.writer, unit, 'default'));
      expect(await snapshot(unit, 'default')).toEqual(before);
      const v1 = await api(root(), 'GET', unitPath(unit, '/versions/1'));
      const r = await OPS['api restore 1'].run(ids.admin, unit, 'default');
      expect(r.status).toBe(200);
      expect((r as Reply & { json: () => Record<string, unknown> }).json()).toMatchObject({
        created: true,
        version: { version: 3, restoredFrom: 1 },
      });
      expect((await stored(unit)).body.equals(v1.body)).toBe(true);
    });

    it('unit delete, undelete and purge: each refused to svc:writer (stores nothing), done by svc:admin', async () => {
      const unit = 'team/trash';
      let before = await snapshot(unit, 'default');
      expectForbidden(
        'api',
        'DELETE',
        await OPS['api DELETE unit'].run(ids.writer, unit, 'default'),
      );
      expect(await snapshot(unit, 'default')).toEqual(before);
      expect((await OPS['api DELETE unit'].run(ids.admin, unit, 'default')).status).toBe(204);

      before = await snapshot(unit, 'default');
      expect((before as { units: string[]; unit: unknown }).units).not.toContain(unit);
      expect((before as { unit: unknown }).unit).toBe(404);
      expectForbidden('api', 'POST', await OPS['api undelete'].run(ids.writer, unit, 'default'));
      expect(await snapshot(unit, 'default')).toEqual(before);
      expect((await OPS['api undelete'].run(ids.admin, unit, 'default')).status).toBe(204);
      expect((await stored(unit)).status).toBe(200);

      expect((await OPS['api DELETE unit'].run(ids.admin, unit, 'default')).status).toBe(204);
      before = await snapshot(unit, 'default');
      expectForbidden('api', 'POST', await OPS['api purge'].run(ids.writer, unit, 'default'));
      expect(await snapshot(unit, 'default')).toEqual(before);
      expect((await OPS['api purge'].run(ids.admin, unit, 'default')).status).toBe(204);
      expect((await api(root(), 'GET', `/v1/units/${enc(unit)}`)).status).toBe(404);
      expect((await api(root(), 'GET', unitPath(unit, '/versions'))).status).toBe(404);
    });

    it('svc:admin (unit.create through the admin role) brings a new unit into being by writing', async () => {
      const r = await OPS['http POST'].run(ids.admin, 'team/created-by-admin', 'default');
      expect(r.status).toBe(200);
      expect(await versionCount('team/created-by-admin')).toBe(1);
    });
  });

  describe('workspace-restricted writer (*/prod, workspace prod)', () => {
    it.each([
      ['HTTP backend POST', 'http POST', 200],
      ['S3 PutObject', 's3 PutObject', 200],
      ['API PUT /state', 'api PUT state', 200],
    ] as [string, OpName, number][])('%s in workspace prod is accepted', async (_l, op, status) => {
      const before = await versionCount('app/prod', 'prod');
      const r = await OPS[op].run(ids.prodWriter, 'app/prod', 'prod');
      expect(r.status).toBe(status);
      expect(await versionCount('app/prod', 'prod')).toBe(before + 1);
    });
  });

  describe('outputs-only readers', () => {
    const NET = 'shared/net';
    let outputsWriter: Identity;
    const simple = JSON.parse(SIMPLE.toString('utf8')) as {
      serial: number;
      lineage: string;
      outputs: Record<string, { value: unknown; sensitive?: boolean }>;
    };

    function expectSynthesized(body: Buffer, sensitive: boolean): void {
      const state = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
      expect(state).toMatchObject({ version: 4, serial: simple.serial, lineage: simple.lineage });
      expect(state.resources).toEqual([]);
      const expected = { ...simple.outputs };
      if (!sensitive) delete expected.db_password;
      expect(state.outputs).toEqual(expected);
      expect(body.toString('utf8').includes(SIMPLE_SECRET)).toBe(sensitive);
      expect(body.toString('utf8')).not.toContain('aws_vpc'); // no resources leak
    }

    it.each([
      ['outputs', false],
      ['outputsSens', true],
    ] as [Who, boolean][])(
      '%s: both doors serve a v4 state of the outputs (sensitive: %s); HEAD and ETag describe that body',
      async (who, sensitive) => {
        const w = ids[who];
        const httpGet = await OPS['http GET'].run(w, NET, 'default');
        expect(httpGet.status).toBe(200);
        expectSynthesized(httpGet.body, sensitive);
        expect(httpGet.headers['content-length']).toBe(String(httpGet.body.length));
        expect(httpGet.headers['content-md5']).toBe(
          createHash('md5').update(httpGet.body).digest('base64'),
        );
        const httpHead = await OPS['http HEAD'].run(w, NET, 'default');
        expect(httpHead.status).toBe(200);
        expect(httpHead.headers['content-length']).toBe(String(httpGet.body.length));

        const s3Get = await OPS['s3 GetObject'].run(w, NET, 'default');
        expect(s3Get.status).toBe(200);
        expectSynthesized(s3Get.body, sensitive);
        expect(s3Get.headers.etag).toBe(`"${md5Hex(s3Get.body)}"`);
        expect(s3Get.headers['content-length']).toBe(String(s3Get.body.length));
        const s3Head = await OPS['s3 HeadObject'].run(w, NET, 'default');
        expect(s3Head.status).toBe(200);
        expect(s3Head.headers.etag).toBe(s3Get.headers.etag);
        expect(s3Head.headers['content-length']).toBe(String(s3Get.body.length));
        // the same bytes through both doors
        expect(s3Get.body.equals(httpGet.body)).toBe(true);

        const outputs = await OPS['api GET outputs'].run(w, NET, 'default');
        expect(outputs.status).toBe(200);
        const o = JSON.parse(outputs.text) as { outputs: Record<string, unknown> };
        expect(Object.keys(o.outputs).sort()).toEqual(
          sensitive ? ['db_password', 'subnets', 'vpc_cidr'] : ['subnets', 'vpc_cidr'],
        );
        expect(outputs.text.includes(SIMPLE_SECRET)).toBe(sensitive);
      },
    );

    it('a full reader gets the real bytes, with the resources', async () => {
      const full = await OPS['http GET'].run(ids.admin, NET, 'default');
      expect(full.status).toBe(200);
      expect(full.body.equals(SIMPLE)).toBe(true);
    });

    it.each([
      ['HTTP backend POST', 'http POST'],
      ['S3 PutObject', 's3 PutObject'],
      ['API PUT /state', 'api PUT state'],
    ] as [string, OpName][])(
      'writing the synthesized state back is refused (%s), even with unit.write',
      async (_label, op) => {
        // svc:outputs-writer: outputs.read + unit.write on shared/net, but no unit.read
        const before = await snapshot(NET, 'default');
        const r = await OPS[op].run(outputsWriter, NET, 'default');
        expectForbidden(OPS[op].door, 'PUT', r);
        expect(await snapshot(NET, 'default')).toEqual(before);
      },
    );

    beforeAll(async () => {
      const token = (
        await api(root(), 'POST', '/v1/auth/tokens', { name: 'ow', subject: 'svc:outputs-writer' })
      ).json().token as string;
      outputsWriter = { token, creds: await issueCreds(token) };
      await permission('outputs-writer', [
        { effect: 'allow', actions: ['outputs.read', 'unit.write'], resources: ['shared/net'] },
      ]);
      const r = await api(ids.admin.token, 'POST', '/v1/rbac/assignments', {
        role: 'outputs-writer',
        subject: 'svc:outputs-writer',
      });
      expect(r.status).toBe(201);
    });
  });

  describe('a deny scoped to one workspace covers the unit-wide actions (svc:team-c, team-c/app, prod)', () => {
    const APP = 'team-c/app';

    it('deleting the prod state is 403, and so is deleting the whole unit: Terraform still finds prod', async () => {
      const before = [await snapshot(APP, 'prod'), await snapshot(APP, 'default')];
      expectForbidden('api', 'DELETE', await OPS['api DELETE state'].run(ids.teamC, APP, 'prod'));
      const r = await OPS['api DELETE unit'].run(ids.teamC, APP, 'default');
      expectForbidden('api', 'DELETE', r);
      expect(r.text).not.toContain('prod');
      expect([await snapshot(APP, 'prod'), await snapshot(APP, 'default')]).toEqual(before);
      // prod is still there for its readers: never the 404 that means "no state"
      expect((await OPS['http GET'].run(ids.admin, APP, 'prod')).status).toBe(200);
    });

    it('undeleting or purging the unit is 403 too, once an admin deleted it', async () => {
      expect((await OPS['api DELETE unit'].run(ids.admin, APP, 'default')).status).toBe(204);
      const before = await snapshot(APP, 'prod');
      expectForbidden('api', 'POST', await OPS['api undelete'].run(ids.teamC, APP, 'default'));
      expectForbidden('api', 'POST', await OPS['api purge'].run(ids.teamC, APP, 'default'));
      expect(await snapshot(APP, 'prod')).toEqual(before);
      expect((await OPS['api undelete'].run(ids.admin, APP, 'default')).status).toBe(204);
      expect((await OPS['http GET'].run(ids.admin, APP, 'prod')).status).toBe(200);
    });

    it('GET /v1/units/{name} and /workspaces show neither prod nor its serial, size, time or lock', async () => {
      const all = await api(root(), 'GET', `/v1/units/${enc(APP)}`);
      expect(
        (all.json().workspaces as { workspace: string }[]).map((w) => w.workspace).sort(),
      ).toEqual(['default', 'prod']);
      const one = await api(ids.teamC.token, 'GET', `/v1/units/${enc(APP)}`);
      expect(one.status).toBe(200);
      expect((one.json().workspaces as { workspace: string }[]).map((w) => w.workspace)).toEqual([
        'default',
      ]);
      expect(one.text).not.toContain('prod');
      const ws = await api(ids.teamC.token, 'GET', `/v1/units/${enc(APP)}/workspaces`);
      expect(ws.status).toBe(200);
      expect((JSON.parse(ws.text) as { workspace: string }[]).map((w) => w.workspace)).toEqual([
        'default',
      ]);
    });
  });

  describe('every read path of current and old versions, and restore, against the same rules', () => {
    /**
     * What a request answered: 403, 404, the stored state ("full"), an outputs-only state, or
     * 200 without a state in the body ("ok": HEAD, the version list, the outputs).
     */
    type Outcome = 403 | 404 | 'full' | 'outputs' | 'ok';
    const READ_PATHS: OpName[] = [
      'http GET',
      'http HEAD',
      's3 GetObject',
      's3 HeadObject',
      'api GET state',
      'api GET outputs',
      'api versions',
      'api version 1',
    ];

    async function outcome(op: OpName, who: Who, unit: string): Promise<Outcome> {
      const r = await OPS[op].run(ids[who], unit, 'default');
      if (r.status === 403 || r.status === 404) {
        expectForbiddenOrMissing(op, r);
        return r.status;
      }
      expect({ op, status: r.status }).toEqual({ op, status: 200 });
      if (methodOf(op) === 'HEAD' || op === 'api versions' || op === 'api GET outputs') {
        return 'ok';
      }
      const state = JSON.parse(r.text) as { resources: unknown[] };
      return state.resources.length === 0 ? 'outputs' : 'full';
    }

    function expectForbiddenOrMissing(op: OpName, r: Reply): void {
      if (r.status === 403) expectForbidden(OPS[op].door, methodOf(op), r);
    }

    /** The answers of READ_PATHS, in order. */
    const MATRIX: [Who, string, Outcome[]][] = [
      // the reader role plus an explicit deny of unit.read: nothing, old versions included
      ['readerSecret', 'team/secret', [403, 403, 403, 403, 403, 403, 403, 403]],
      ['readerSecret', 'team/app', ['full', 'ok', 'full', 'ok', 'full', 'ok', 'ok', 'full']],
      // outputs.read + version.read: an outputs-only state of the current and of an old version
      [
        'historyOutputs',
        'shared/net',
        ['outputs', 'ok', 'outputs', 'ok', 403, 'ok', 'ok', 'outputs'],
      ],
      // version.restore alone reads nothing
      ['restorer', 'team/restorable-2', [403, 403, 403, 403, 403, 403, 403, 403]],
    ];

    it.each(MATRIX)('%s on %s', async (who, unit, expected) => {
      const got: Outcome[] = [];
      for (const op of READ_PATHS) got.push(await outcome(op, who, unit));
      expect(Object.fromEntries(READ_PATHS.map((op, i) => [op, got[i]]))).toEqual(
        Object.fromEntries(READ_PATHS.map((op, i) => [op, expected[i]])),
      );
    });

    it('an old version served outputs-only is the same state the doors serve for it', async () => {
      // shared/net has one version: /versions/1 and the current state are the same outputs
      const door = await OPS['http GET'].run(ids.historyOutputs, 'shared/net', 'default');
      const old = await OPS['api version 1'].run(ids.historyOutputs, 'shared/net', 'default');
      expect(old.body.equals(door.body)).toBe(true);
      expect(old.text).not.toContain(SIMPLE_SECRET);
      expect(old.headers['content-md5']).toBe(door.headers['content-md5']);
    });

    it.each([
      ['version.restore alone', 'restorer', 'team/restorable-2', 403],
      ['an explicit unit.write deny', 'restorerNoWrite', 'team/secret', 403],
      ['the reader role (no version.restore)', 'readerSecret', 'team/app', 403],
      ['version.restore + unit.read + unit.write', 'restorerNoWrite', 'team/restorable-2', 200],
    ] as [string, Who, string, number][])(
      'restore with %s (%s on %s) → %d',
      async (_label, who, unit, status) => {
        const before = await snapshot(unit, 'default');
        const r = await OPS['api restore 1'].run(ids[who], unit, 'default');
        if (status === 403) {
          expectForbidden('api', 'POST', r);
          expect(await snapshot(unit, 'default')).toEqual(before);
          return;
        }
        expect(r.status).toBe(200);
        expect(JSON.parse(r.text)).toMatchObject({ created: true, version: { restoredFrom: 1 } });
      },
    );
  });

  describe('listings show only what the caller may see', () => {
    async function unitNames(who: Who): Promise<string[]> {
      const r = await api(ids[who].token, 'GET', '/v1/units?limit=1000');
      expect(r.status).toBe(200);
      return (r.json().items as { name: string }[]).map((u) => u.name).sort();
    }
    async function lockNames(who: Who): Promise<string[]> {
      const r = await api(ids[who].token, 'GET', '/v1/locks');
      expect(r.status).toBe(200);
      return (JSON.parse(r.text) as { unit: string; workspace: string }[])
        .map((l) => `${l.unit}@${l.workspace}`)
        .sort();
    }
    async function s3Keys(who: Who): Promise<string[]> {
      const r = await s3(ids[who].creds, 'GET', `/s3/${BUCKET}`, { query: 'list-type=2' });
      expect(r.status).toBe(200);
      return keysOf(r.text).sort();
    }

    let all: string[];
    beforeAll(async () => {
      const r = await api(root(), 'GET', '/v1/units?limit=1000');
      all = (r.json().items as { name: string }[]).map((u) => u.name).sort();
      expect(all).toEqual(
        expect.arrayContaining(['hidden/vault', 'shared/net', 'team/app', 'app/prod']),
      );
    });

    it('GET /v1/units', async () => {
      const team = all.filter((n) => n.startsWith('team/'));
      expect(await unitNames('admin')).toEqual(all);
      expect(await unitNames('reader')).toEqual(team);
      expect(await unitNames('writer')).toEqual(team);
      expect(await unitNames('denied')).toEqual(team.filter((n) => n !== 'team/secret'));
      expect(await unitNames('outputs')).toEqual(['shared/net']);
      expect(await unitNames('outputsSens')).toEqual(['shared/net']);
      expect(await unitNames('nobody')).toEqual([]);
      expect(await unitNames('locker')).toEqual([]); // unit.lock is no read access
    });

    it('GET /v1/units for a workspace-restricted reader lists the unit it may read in that workspace', async () => {
      // svc:prod-writer may read app/prod in workspace prod: the unit exists for it
      expect(await unitNames('prodWriter')).toEqual(['app/prod']);
    });

    it('GET /v1/locks', async () => {
      expect(await lockNames('admin')).toEqual(['hidden/vault@default', 'team/locked@default']);
      expect(await lockNames('reader')).toEqual(['team/locked@default']);
      expect(await lockNames('denied')).toEqual(['team/locked@default']);
      expect(await lockNames('outputs')).toEqual([]);
      expect(await lockNames('nobody')).toEqual([]);
      expect(await lockNames('locker')).toEqual([]);
    });

    it('S3 ListObjectsV2 lists only readable keys (workspace by workspace)', async () => {
      const adminKeys = await s3Keys('admin');
      expect(adminKeys).toEqual(
        expect.arrayContaining([
          'hidden/vault/terraform.tfstate',
          'shared/net/terraform.tfstate',
          'app/prod/terraform.tfstate',
          'env:/prod/app/prod/terraform.tfstate',
          'team/app/terraform.tfstate',
        ]),
      );
      const teamKeys = adminKeys.filter((k) => k.startsWith('team/'));
      expect(await s3Keys('reader')).toEqual(teamKeys);
      expect(await s3Keys('denied')).toEqual(
        teamKeys.filter((k) => k !== 'team/secret/terraform.tfstate'),
      );
      expect(await s3Keys('outputs')).toEqual(['shared/net/terraform.tfstate']);
      expect(await s3Keys('prodWriter')).toEqual(['env:/prod/app/prod/terraform.tfstate']);
      expect(await s3Keys('nobody')).toEqual([]);
      expect(await s3Keys('locker')).toEqual([]);
    });

    it('S3 ListObjectsV2 of an outputs-only key shows the size and ETag of what that reader is served', async () => {
      const r = await s3(ids.outputs.creds, 'GET', `/s3/${BUCKET}`, { query: 'list-type=2' });
      expect(r.status).toBe(200);
      const served = await OPS['s3 GetObject'].run(ids.outputs, 'shared/net', 'default');
      expect(served.status).toBe(200);
      const listed = /<Contents>.*?<ETag>([^<]*)<\/ETag><Size>(\d+)<\/Size>/.exec(r.text);
      expect({ etag: listed?.[1].replace(/&quot;/g, '"'), size: Number(listed?.[2]) }).toEqual({
        etag: served.headers.etag,
        size: served.body.length,
      });
    });
  });
});
