/**
 * The audit log through `GET /v1/audit`, against the real `statehouse serve` process: who may
 * read it (`audit.read`), its filters and cursor pagination, and the events the doors leave —
 * bootstrap-token use, authentication failures (with their reason, never the secret), state
 * writes and reads, lock / unlock / force-unlock, restore, delete, purge, RBAC changes, API
 * token creation and revocation. A refused write leaves no `state.write` (changes are audited in
 * their own transaction); 50 rapid unauthenticated failures from one address are a few rows whose
 * counts add up to 50; and no row anywhere holds a token, a key, a signature or state content.
 *
 * The server trusts 127.0.0.1 as a proxy, so each test can send its own `X-Forwarded-For`
 * address and find its rows by client address; requests also carry their own `X-Request-Id`.
 */
import { createHash, createHmac, randomUUID } from 'node:crypto';
import { IncomingHttpHeaders, request as httpRequest } from 'node:http';
import { freshServerEnv } from '../support/database';
import { RunningServer, spawnServer } from '../support/server';
import { nullResource, tfStateText } from '../support/tf-state';

jest.setTimeout(120_000);

const BUCKET = 'tfstate';
const REGION = 'us-east-1';
/** Appears in every state body written here: it must never reach an audit row. */
const STATE_MARKER = `state-content-${randomUUID()}`;

interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

interface Creds {
  AccessKeyId: string;
  SecretAccessKey: string;
  SessionToken: string;
}

interface AuditEvent {
  id: string;
  at: string;
  type: string;
  principal: string;
  action: string | null;
  resource: string | null;
  workspace: string | null;
  decision: string;
  door: string | null;
  requestId: string | null;
  clientIp: string | null;
  details: Record<string, unknown> | null;
  count: number;
}

let server: RunningServer;
/** Every secret and signature presented to the server in this file. */
const secrets = new Set<string>();

const sha256Hex = (b: Buffer | string): string => createHash('sha256').update(b).digest('hex');
const hmac = (key: Buffer | string, data: string): Buffer =>
  createHmac('sha256', key).update(data, 'utf8').digest();
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function send(
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string | Buffer,
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
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            text: Buffer.concat(parts).toString('utf8'),
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(b);
  });
}

/** A request with its own id and (through the trusted proxy) its own client address. */
interface Via {
  requestId?: string;
  ip?: string;
}
function tagged(via: Via = {}): Record<string, string> {
  return {
    ...(via.requestId ? { 'x-request-id': via.requestId } : {}),
    ...(via.ip ? { 'x-forwarded-for': via.ip } : {}),
  };
}

function call(
  token: string,
  method: string,
  path: string,
  body?: unknown,
  via: Via = {},
): Promise<Reply> {
  return send(
    method,
    path,
    {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...tagged(via),
    },
    body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  );
}

function rfc3986(s: string): string {
  return encodeURIComponent(s).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

/** A SigV4-signed S3 request; `tamper` may break the signature after signing. */
function s3(
  creds: Creds,
  method: string,
  key: string,
  opts: { body?: Buffer; via?: Via; tamper?: (sig: string) => string } = {},
): Promise<Reply> {
  const path = `/s3/${BUCKET}/${key.split('/').map(rfc3986).join('/')}`;
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
  };
  const names = Object.keys(headers).sort();
  const canonical = [
    method,
    path,
    '',
    names.map((n) => `${n}:${headers[n]}\n`).join(''),
    names.join(';'),
    headers['x-amz-content-sha256'],
  ].join('\n');
  const signingKey = hmac(
    hmac(hmac(hmac(`AWS4${creds.SecretAccessKey}`, date), REGION), 's3'),
    'aws4_request',
  );
  let signature = hmac(
    signingKey,
    `AWS4-HMAC-SHA256\n${amzDate}\n${scope}\n${sha256Hex(canonical)}`,
  ).toString('hex');
  if (opts.tamper) signature = opts.tamper(signature);
  secrets.add(signature);
  return send(
    method,
    path,
    {
      ...headers,
      authorization: `AWS4-HMAC-SHA256 Credential=${creds.AccessKeyId}/${scope}, SignedHeaders=${names.join(';')}, Signature=${signature}`,
      ...tagged(opts.via),
    },
    opts.body,
  );
}

function tfState(serial: number, lineage = 'audit-lineage'): string {
  return tfStateText({
    serial,
    lineage,
    outputs: { marker: STATE_MARKER },
    resources: [nullResource(`${STATE_MARKER}-attr`)],
  });
}

function lockInfo(id: string): string {
  return `{"ID":"${id}","Operation":"OperationTypeApply","Info":"","Who":"audit@e2e","Version":"1.11.4","Created":"2026-01-02T03:04:05.123456789Z","Path":""}`;
}

const enc = encodeURIComponent;
const rid = (label: string): string => `audit-${label}-${randomUUID()}`;
let ipCounter = 10;
/** A client address no other test uses (TEST-NET-3). */
const freshIp = (): string => `203.0.113.${++ipCounter}`;

describe('audit log (GET /v1/audit)', () => {
  let cleanup: () => Promise<void>;
  const tok: Record<string, string> = {};
  let writerCreds: Creds;

  /** One page of events, as the auditor sees it. */
  async function page(query = ''): Promise<{ items: AuditEvent[]; nextCursor: string | null }> {
    const r = await call(tok.auditor, 'GET', `/v1/audit${query === '' ? '' : `?${query}`}`);
    expect({ status: r.status, text: r.status === 200 ? '' : r.text }).toEqual({
      status: 200,
      text: '',
    });
    return JSON.parse(r.text) as { items: AuditEvent[]; nextCursor: string | null };
  }

  /** Every event matching `query`, following the cursor. */
  async function all(query = ''): Promise<AuditEvent[]> {
    const out: AuditEvent[] = [];
    let cursor: string | null = null;
    for (;;) {
      const q = [query, 'limit=1000', cursor ? `cursor=${cursor}` : ''].filter((s) => s !== '');
      const p = await page(q.join('&'));
      out.push(...p.items);
      if (p.nextCursor === null) return out;
      cursor = p.nextCursor;
    }
  }

  /** The events of one request (stored in its transaction or with the next batch). */
  async function ofRequest(requestId: string): Promise<AuditEvent[]> {
    return (await all()).filter((e) => e.requestId === requestId);
  }

  async function serviceToken(name: string): Promise<string> {
    const r = await call(server.token, 'POST', '/v1/auth/tokens', {
      name: `audit ${name}`,
      subject: `svc:${name}`,
    });
    expect(r.status).toBe(201);
    const t = (JSON.parse(r.text) as { token: string }).token;
    secrets.add(t);
    secrets.add(t.slice(4));
    return t;
  }

  async function grant(role: string, subject: string, rules: unknown[]): Promise<void> {
    for (const [path, body] of [
      ['/v1/rbac/permissions', { name: role, rules }],
      ['/v1/rbac/roles', { name: role, permissions: [role] }],
      ['/v1/rbac/assignments', { role, subject }],
    ] as [string, unknown][]) {
      const r = await call(tok.admin, 'POST', path, body);
      expect(r.status).toBe(201);
    }
  }

  beforeAll(async () => {
    const env = await freshServerEnv();
    cleanup = env.cleanup;
    server = await spawnServer({ ...env.env, STATEHOUSE_TRUSTED_PROXIES: '127.0.0.1' });
    secrets.add(server.token);
    for (const n of ['admin', 'writer', 'reader', 'auditor']) tok[n] = await serviceToken(n);
    const init = await call(server.token, 'POST', '/v1/rbac/init', {
      admin: { subject: 'svc:admin' },
    });
    expect(init.status).toBe(201);
    await grant('writer', 'svc:writer', [
      {
        effect: 'allow',
        actions: ['unit.read', 'unit.write', 'unit.lock'],
        resources: ['team/**'],
      },
    ]);
    // (init made a role called reader already: this one has its own name)
    await grant('team-reader', 'svc:reader', [
      { effect: 'allow', actions: ['unit.read'], resources: ['team/**'] },
    ]);
    await grant('auditor', 'svc:auditor', [
      { effect: 'allow', actions: ['audit.read'], resources: ['*'] },
    ]);
    // the unit the writer works on exists (the writer has no unit.create)
    const seed = await send(
      'POST',
      '/v1/backend/team/audited',
      { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' },
      tfState(1),
    );
    expect(seed.status).toBe(200);
    const creds = await call(tok.writer, 'POST', '/v1/auth/issue-s3-creds');
    expect(creds.status).toBe(200);
    writerCreds = JSON.parse(creds.text) as Creds;
    secrets.add(writerCreds.SecretAccessKey);
    secrets.add(writerCreds.SessionToken);
  });

  afterAll(async () => {
    await server?.stop();
    await cleanup?.();
  });

  describe('who may read it', () => {
    it('needs audit.read: 403 (naming it) for a writer and a reader, 401 without a token', async () => {
      for (const t of [tok.writer, tok.reader]) {
        const r = await call(t, 'GET', '/v1/audit');
        expect(r.status).toBe(403);
        expect(JSON.parse(r.text)).toMatchObject({
          code: 'forbidden',
          message: expect.stringMatching(/may not audit\.read/),
        });
      }
      expect((await send('GET', '/v1/audit')).status).toBe(401);
      expect((await call(tok.auditor, 'GET', '/v1/audit')).status).toBe(200);
      expect((await call(tok.admin, 'GET', '/v1/audit')).status).toBe(200);
      expect((await call(server.token, 'GET', '/v1/audit')).status).toBe(200);
    });

    it('a refused read of the log is itself in the log (authz.denied)', async () => {
      const id = rid('denied-audit');
      expect(
        (await call(tok.reader, 'GET', '/v1/audit', undefined, { requestId: id })).status,
      ).toBe(403);
      expect(await ofRequest(id)).toEqual([
        expect.objectContaining({
          type: 'authz.denied',
          principal: 'svc:reader',
          action: 'audit.read',
          decision: 'denied',
          count: 1,
        }),
      ]);
    });
  });

  describe('events', () => {
    it('every use of the bootstrap token', async () => {
      const id = rid('bootstrap');
      const ip = freshIp();
      expect(
        (await call(server.token, 'GET', '/v1/units', undefined, { requestId: id, ip })).status,
      ).toBe(200);
      expect(await ofRequest(id)).toEqual([
        expect.objectContaining({
          type: 'auth.bootstrap_token_used',
          principal: 'bootstrap-admin',
          decision: 'success',
          clientIp: ip,
          requestId: id,
        }),
      ]);
    });

    it('authentication failures: the reason, the address, never the secret', async () => {
      const bogus = `sht_${randomUUID().replace(/-/g, '')}${randomUUID().replace(/-/g, '')}`;
      secrets.add(bogus);
      secrets.add(bogus.slice(4));
      const id = rid('auth-failed');
      const ip = freshIp();
      expect((await call(bogus, 'GET', '/v1/units', undefined, { requestId: id, ip })).status).toBe(
        401,
      );
      const [e] = await ofRequest(id);
      expect(e).toMatchObject({
        type: 'auth.failed',
        principal: 'anonymous',
        decision: 'denied',
        clientIp: ip,
        details: { reason: expect.stringMatching(/unknown token/) },
      });
      expect(JSON.stringify(e)).not.toContain(bogus.slice(4));

      // a revoked token says so
      const t = await serviceToken('short-lived');
      const list = JSON.parse((await call(server.token, 'GET', '/v1/auth/tokens')).text) as {
        id: string;
        subject: string;
      }[];
      const tokenId = list.find((x) => x.subject === 'svc:short-lived')?.id as string;
      expect((await call(server.token, 'DELETE', `/v1/auth/tokens/${tokenId}`)).status).toBe(204);
      const id2 = rid('revoked');
      expect((await call(t, 'GET', '/v1/units', undefined, { requestId: id2 })).status).toBe(401);
      expect((await ofRequest(id2))[0]).toMatchObject({
        type: 'auth.failed',
        details: { reason: expect.stringMatching(/revoked/) },
      });

      // the S3 door: an access key it never issued, and a broken signature
      const id3 = rid('s3-key');
      const r3 = await s3(
        { ...writerCreds, AccessKeyId: `SH${'X'.repeat(18)}` },
        'GET',
        'team/audited/terraform.tfstate',
        { via: { requestId: id3 } },
      );
      expect(r3.status).toBe(403);
      expect((await ofRequest(id3))[0]).toMatchObject({
        type: 'auth.failed',
        door: 's3',
        decision: 'denied',
        details: { code: 'InvalidAccessKeyId', reason: expect.any(String) },
      });
      const id4 = rid('s3-sig');
      const r4 = await s3(writerCreds, 'GET', 'team/audited/terraform.tfstate', {
        via: { requestId: id4 },
        tamper: (sig) => `${sig.slice(0, -4)}0000`,
      });
      expect(r4.status).toBe(403);
      const [s4] = await ofRequest(id4);
      expect(s4).toMatchObject({
        type: 'auth.failed',
        door: 's3',
        details: { code: 'SignatureDoesNotMatch' },
      });
      for (const s of secrets) expect(JSON.stringify(s4)).not.toContain(s);
    });

    it('state writes and reads, through each door, with principal, action, resource, door and decision', async () => {
      const post = rid('http-write');
      const r1 = await send(
        'POST',
        '/v1/backend/team/audited',
        {
          authorization: `Bearer ${tok.writer}`,
          'content-type': 'application/json',
          ...tagged({ requestId: post }),
        },
        tfState(2),
      );
      expect(r1.status).toBe(200);
      expect(await ofRequest(post)).toEqual([
        expect.objectContaining({
          type: 'state.write',
          principal: 'svc:writer',
          action: 'unit.write',
          resource: 'team/audited',
          workspace: 'default',
          door: 'http',
          decision: 'success',
          details: expect.objectContaining({ version: 2, serial: 2 }),
          count: 1,
        }),
      ]);

      const get = rid('http-read');
      const r2 = await send('GET', '/v1/backend/team/audited', {
        authorization: `Bearer ${tok.reader}`,
        ...tagged({ requestId: get }),
      });
      expect(r2.status).toBe(200);
      expect(await ofRequest(get)).toEqual([
        expect.objectContaining({
          type: 'state.read',
          principal: 'svc:reader',
          action: 'unit.read',
          resource: 'team/audited',
          decision: 'success',
          details: expect.objectContaining({ version: 2, synthesized: false }),
        }),
      ]);

      const put = rid('s3-write');
      const r3 = await s3(writerCreds, 'PUT', 'team/audited/terraform.tfstate', {
        body: Buffer.from(tfState(3)),
        via: { requestId: put },
      });
      expect(r3.status).toBe(200);
      expect(await ofRequest(put)).toEqual([
        expect.objectContaining({
          type: 'state.write',
          principal: 'svc:writer',
          door: 's3',
          resource: 'team/audited',
          details: expect.objectContaining({ version: 3 }),
        }),
      ]);
      const s3get = rid('s3-read');
      expect(
        (
          await s3(writerCreds, 'GET', 'team/audited/terraform.tfstate', {
            via: { requestId: s3get },
          })
        ).status,
      ).toBe(200);
      expect(await ofRequest(s3get)).toEqual([
        expect.objectContaining({
          type: 'state.read',
          principal: 'svc:writer',
          resource: 'team/audited',
        }),
      ]);

      const api = rid('api-write');
      const r4 = await call(
        tok.writer,
        'PUT',
        `/v1/units/${enc('team/audited')}/state`,
        tfState(4),
        { requestId: api },
      );
      expect(r4.status).toBe(200);
      expect(await ofRequest(api)).toEqual([
        expect.objectContaining({
          type: 'state.write',
          door: 'api',
          details: expect.objectContaining({ version: 4 }),
        }),
      ]);
    });

    it('a refused write leaves no state.write (changes are audited in their transaction)', async () => {
      const writes = async () => (await all('type=state.write&resource=team/audited')).length;
      const before = await writes();
      const versionsBefore = (
        await call(tok.admin, 'GET', `/v1/units/${enc('team/audited')}/versions`)
      ).text;

      const denied = rid('denied-write');
      const r1 = await send(
        'POST',
        '/v1/backend/team/audited',
        {
          authorization: `Bearer ${tok.reader}`,
          'content-type': 'application/json',
          ...tagged({ requestId: denied }),
        },
        tfState(99),
      );
      expect(r1.status).toBe(403);
      expect(await ofRequest(denied)).toEqual([
        expect.objectContaining({
          type: 'authz.denied',
          principal: 'svc:reader',
          decision: 'denied',
          resource: 'team/audited',
        }),
      ]);

      const stale = rid('stale-write');
      const r2 = await send(
        'POST',
        '/v1/backend/team/audited',
        {
          authorization: `Bearer ${tok.writer}`,
          'content-type': 'application/json',
          ...tagged({ requestId: stale }),
        },
        tfState(1),
      );
      expect(r2.status).toBe(409);
      expect((await ofRequest(stale)).filter((e) => e.type === 'state.write')).toEqual([]);

      const badMd5 = rid('md5-write');
      const r3 = await send(
        'POST',
        '/v1/backend/team/audited',
        {
          authorization: `Bearer ${tok.writer}`,
          'content-type': 'application/json',
          'content-md5': createHash('md5').update('something else').digest('base64'),
          ...tagged({ requestId: badMd5 }),
        },
        tfState(50),
      );
      expect(r3.status).toBe(400);
      expect((await ofRequest(badMd5)).filter((e) => e.type === 'state.write')).toEqual([]);

      const locked = rid('locked-write');
      const lockId = randomUUID();
      expect(
        (await call(tok.admin, 'POST', `/v1/units/${enc('team/audited')}/lock`, lockInfo(lockId)))
          .status,
      ).toBe(200);
      const r4 = await send(
        'POST',
        '/v1/backend/team/audited',
        {
          authorization: `Bearer ${tok.writer}`,
          'content-type': 'application/json',
          ...tagged({ requestId: locked }),
        },
        tfState(60),
      );
      expect(r4.status).toBe(409);
      expect((await ofRequest(locked)).filter((e) => e.type === 'state.write')).toEqual([]);
      expect(
        (await call(tok.admin, 'DELETE', `/v1/units/${enc('team/audited')}/lock?id=${lockId}`))
          .status,
      ).toBe(204);

      expect(await writes()).toBe(before);
      expect((await call(tok.admin, 'GET', `/v1/units/${enc('team/audited')}/versions`)).text).toBe(
        versionsBefore,
      );
    });

    it('lock, unlock, a refused force-unlock and a force-unlock', async () => {
      const unit = 'team/audited';
      const id = randomUUID();
      const lock = rid('lock');
      expect(
        (
          await send(
            'LOCK',
            `/v1/backend/${unit}`,
            { authorization: `Bearer ${tok.writer}`, ...tagged({ requestId: lock }) },
            lockInfo(id),
          )
        ).status,
      ).toBe(200);
      expect(await ofRequest(lock)).toEqual([
        expect.objectContaining({
          type: 'lock.acquire',
          principal: 'svc:writer',
          action: 'unit.lock',
          resource: unit,
          door: 'http',
          details: { lock_id: id },
        }),
      ]);
      const unlock = rid('unlock');
      expect(
        (
          await send(
            'UNLOCK',
            `/v1/backend/${unit}`,
            { authorization: `Bearer ${tok.writer}`, ...tagged({ requestId: unlock }) },
            lockInfo(id),
          )
        ).status,
      ).toBe(200);
      expect(await ofRequest(unlock)).toEqual([
        expect.objectContaining({
          type: 'lock.release',
          principal: 'svc:writer',
          resource: unit,
          details: { lock_id: id },
        }),
      ]);

      const id2 = randomUUID();
      expect(
        (
          await send(
            'LOCK',
            `/v1/backend/${unit}`,
            { authorization: `Bearer ${tok.writer}` },
            lockInfo(id2),
          )
        ).status,
      ).toBe(200);
      const refused = rid('force-refused');
      expect(
        (
          await send('UNLOCK', `/v1/backend/${unit}`, {
            authorization: `Bearer ${tok.writer}`,
            ...tagged({ requestId: refused }),
          })
        ).status,
      ).toBe(403);
      expect(await ofRequest(refused)).toEqual(
        expect.arrayContaining([
          expect.objectContaining({
            type: 'lock.force_unlock',
            principal: 'svc:writer',
            decision: 'denied',
            resource: unit,
          }),
        ]),
      );
      const forced = rid('force');
      const f = await call(tok.admin, 'POST', `/v1/units/${enc(unit)}/force-unlock`, undefined, {
        requestId: forced,
      });
      expect(f.status).toBe(200);
      expect(await ofRequest(forced)).toEqual([
        expect.objectContaining({
          type: 'lock.force_unlock',
          principal: 'svc:admin',
          action: 'unit.force-unlock',
          decision: 'success',
          door: 'api',
          details: expect.objectContaining({ lock_id: id2, holder: 'svc:writer' }),
        }),
      ]);
    });

    it('restore, delete of a state, delete of a unit, purge', async () => {
      const unit = 'team/audited';
      const restore = rid('restore');
      expect(
        (
          await call(tok.admin, 'POST', `/v1/units/${enc(unit)}/versions/1/restore`, undefined, {
            requestId: restore,
          })
        ).status,
      ).toBe(200);
      expect(await ofRequest(restore)).toEqual([
        expect.objectContaining({
          type: 'state.restore',
          principal: 'svc:admin',
          action: 'version.restore',
          resource: unit,
          details: expect.objectContaining({ from_version: 1 }),
        }),
      ]);
      const del = rid('delete-state');
      expect(
        (
          await call(tok.writer, 'DELETE', `/v1/units/${enc(unit)}/state`, undefined, {
            requestId: del,
          })
        ).status,
      ).toBe(204);
      expect(await ofRequest(del)).toEqual([
        expect.objectContaining({
          type: 'state.delete',
          principal: 'svc:writer',
          resource: unit,
          workspace: 'default',
        }),
      ]);
      const delUnit = rid('delete-unit');
      expect(
        (
          await call(tok.admin, 'DELETE', `/v1/units/${enc(unit)}`, undefined, {
            requestId: delUnit,
          })
        ).status,
      ).toBe(204);
      expect(await ofRequest(delUnit)).toEqual([
        expect.objectContaining({
          type: 'unit.delete',
          principal: 'svc:admin',
          action: 'unit.delete',
          resource: unit,
        }),
      ]);
      const purge = rid('purge');
      expect(
        (
          await call(tok.admin, 'POST', `/v1/units/${enc(unit)}/purge`, undefined, {
            requestId: purge,
          })
        ).status,
      ).toBe(204);
      expect(await ofRequest(purge)).toEqual([
        expect.objectContaining({
          type: 'unit.purge',
          principal: 'svc:admin',
          action: 'unit.purge',
          resource: unit,
        }),
      ]);
      // the history of a purged unit stays in the audit log
      expect((await all(`resource=${enc(unit)}&type=state.write`)).length).toBeGreaterThanOrEqual(
        3,
      );
    });

    it('RBAC changes: init, permission, role, assignment, unassignment', async () => {
      const inits = await all('type=rbac.init');
      expect(inits).toEqual([
        expect.objectContaining({
          principal: 'bootstrap-admin',
          decision: 'success',
          details: expect.objectContaining({ op: 'init', admin: 'subject:svc:admin' }),
        }),
      ]);
      const ids = { p: rid('perm'), r: rid('role'), a: rid('assign'), u: rid('unassign') };
      expect(
        (
          await call(
            tok.admin,
            'POST',
            '/v1/rbac/permissions',
            {
              name: 'audited-perm',
              rules: [{ effect: 'allow', actions: ['unit.read'], resources: ['x/**'] }],
            },
            { requestId: ids.p },
          )
        ).status,
      ).toBe(201);
      expect(
        (
          await call(
            tok.admin,
            'POST',
            '/v1/rbac/roles',
            { name: 'audited-role', permissions: ['audited-perm'] },
            { requestId: ids.r },
          )
        ).status,
      ).toBe(201);
      const a = await call(
        tok.admin,
        'POST',
        '/v1/rbac/assignments',
        { role: 'audited-role', group: 'g1' },
        { requestId: ids.a },
      );
      expect(a.status).toBe(201);
      const assignment = (JSON.parse(a.text) as { id: string }).id;
      expect(
        (
          await call(tok.admin, 'DELETE', `/v1/rbac/assignments/${assignment}`, undefined, {
            requestId: ids.u,
          })
        ).status,
      ).toBe(204);
      const change = (id: string, details: Record<string, unknown>) =>
        expect.arrayContaining([
          expect.objectContaining({
            type: 'rbac.change',
            principal: 'svc:admin',
            action: 'rbac.manage',
            decision: 'success',
            requestId: id,
            details: expect.objectContaining(details),
          }),
        ]);
      expect(await ofRequest(ids.p)).toEqual(
        change(ids.p, { op: 'permission.create', name: 'audited-perm' }),
      );
      expect(await ofRequest(ids.r)).toEqual(
        change(ids.r, { op: 'role.create', name: 'audited-role' }),
      );
      expect(await ofRequest(ids.a)).toEqual(
        change(ids.a, { op: 'assign', role: 'audited-role', group: 'g1' }),
      );
      expect(await ofRequest(ids.u)).toEqual(change(ids.u, { op: 'unassign', id: assignment }));
      // a refused change is not a change
      const refused = rid('rbac-refused');
      expect(
        (
          await call(
            tok.writer,
            'POST',
            '/v1/rbac/roles',
            { name: 'nope', permissions: [] },
            { requestId: refused },
          )
        ).status,
      ).toBe(403);
      expect((await ofRequest(refused)).map((e) => e.type)).toEqual(['authz.denied']);
    });

    it('API token creation and revocation (never the token)', async () => {
      const create = rid('token-create');
      const r = await call(
        server.token,
        'POST',
        '/v1/auth/tokens',
        { name: 'audited', subject: 'svc:audited' },
        { requestId: create },
      );
      expect(r.status).toBe(201);
      const { id, token } = JSON.parse(r.text) as { id: string; token: string };
      secrets.add(token);
      secrets.add(token.slice(4));
      const created = (await ofRequest(create)).find((e) => e.type === 'auth.api_token_created');
      expect(created).toMatchObject({
        principal: 'bootstrap-admin',
        action: 'token.manage',
        decision: 'success',
        details: { token_id: id, subject: 'svc:audited', name: 'audited' },
      });
      const revoke = rid('token-revoke');
      expect(
        (
          await call(server.token, 'DELETE', `/v1/auth/tokens/${id}`, undefined, {
            requestId: revoke,
          })
        ).status,
      ).toBe(204);
      expect(
        (await ofRequest(revoke)).find((e) => e.type === 'auth.api_token_revoked'),
      ).toMatchObject({
        principal: 'bootstrap-admin',
        details: { token_id: id, subject: 'svc:audited' },
      });
    });
  });

  describe('the door of every event', () => {
    beforeAll(async () => {
      const seed = await send(
        'POST',
        '/v1/backend/team/doors',
        { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' },
        tfState(1, 'doors'),
      );
      expect(seed.status).toBe(200);
    });

    /** The types of one request's events, with their door. */
    async function doors(requestId: string): Promise<[string, string | null][]> {
      return (await ofRequest(requestId)).map((e) => [e.type, e.door]);
    }

    it('state reads, refusals, authentication and RBAC events name the door they came through', async () => {
      const statusOf = (label: string): number =>
        label.startsWith('authz.denied')
          ? 403
          : label.startsWith('auth.failed')
            ? 401
            : label.includes('api_token_created')
              ? 201
              : 200;
      const basic = (password: string) =>
        `Basic ${Buffer.from(`terraform:${password}`).toString('base64')}`;
      const cases: [string, (id: string) => Promise<Reply>, [string, string][]][] = [
        [
          'state.read through the HTTP backend',
          (id) =>
            send('GET', '/v1/backend/team/doors', {
              authorization: basic(tok.reader),
              ...tagged({ requestId: id }),
            }),
          [['state.read', 'http']],
        ],
        [
          'state.read through the S3 door',
          (id) =>
            s3(writerCreds, 'GET', 'team/doors/terraform.tfstate', { via: { requestId: id } }),
          [['state.read', 's3']],
        ],
        [
          'state.read through the API',
          (id) =>
            call(tok.reader, 'GET', `/v1/units/${enc('team/doors')}/state`, undefined, {
              requestId: id,
            }),
          [['state.read', 'api']],
        ],
        [
          'authz.denied through the HTTP backend',
          (id) =>
            send(
              'POST',
              '/v1/backend/team/doors',
              {
                authorization: `Bearer ${tok.reader}`,
                'content-type': 'application/json',
                ...tagged({ requestId: id }),
              },
              tfState(99),
            ),
          [['authz.denied', 'http']],
        ],
        [
          'authz.denied through the S3 door',
          (id) => s3(writerCreds, 'GET', 'other/x/terraform.tfstate', { via: { requestId: id } }),
          [['authz.denied', 's3']],
        ],
        [
          'authz.denied through the API',
          (id) => call(tok.reader, 'GET', '/v1/audit', undefined, { requestId: id }),
          [['authz.denied', 'api']],
        ],
        [
          'auth.failed through the HTTP backend',
          (id) =>
            send('GET', '/v1/backend/team/doors', {
              authorization: basic('sht_not-a-token'),
              ...tagged({ requestId: id, ip: freshIp() }),
            }),
          [['auth.failed', 'http']],
        ],
        [
          'auth.failed through the API',
          (id) =>
            call('sht_not-a-token', 'GET', '/v1/units', undefined, {
              requestId: id,
              ip: freshIp(),
            }),
          [['auth.failed', 'api']],
        ],
        [
          'auth.bootstrap_token_used through the HTTP backend',
          (id) =>
            send('GET', '/v1/backend/team/doors', {
              authorization: `Bearer ${server.token}`,
              ...tagged({ requestId: id }),
            }),
          [
            ['auth.bootstrap_token_used', 'http'],
            ['state.read', 'http'],
          ],
        ],
        [
          'auth.s3_credentials_issued through the API',
          (id) => call(tok.writer, 'POST', '/v1/auth/issue-s3-creds', undefined, { requestId: id }),
          [['auth.s3_credentials_issued', 'api']],
        ],
        [
          'auth.api_token_created and rbac.change through the API',
          async (id) => {
            const r = await call(
              tok.admin,
              'POST',
              '/v1/rbac/permissions',
              {
                name: `door-${randomUUID().slice(0, 8)}`,
                rules: [{ effect: 'allow', actions: ['unit.read'], resources: ['door/**'] }],
              },
              { requestId: id },
            );
            expect(r.status).toBe(201);
            return call(
              tok.admin,
              'POST',
              '/v1/auth/tokens',
              { name: 'door', subject: 'svc:door' },
              { requestId: id },
            );
          },
          [
            ['rbac.change', 'api'],
            ['auth.api_token_created', 'api'],
          ],
        ],
      ];
      for (const [label, request, expected] of cases) {
        const id = rid('door');
        const r = await request(id);
        if (r.status === 201) {
          const t = (JSON.parse(r.text) as { token?: string }).token;
          if (t) secrets.add(t).add(t.slice(4));
        }
        if (r.status === 200 && label.includes('s3_credentials')) {
          const c = JSON.parse(r.text) as Creds;
          secrets.add(c.SecretAccessKey).add(c.SessionToken);
        }
        expect({ label, status: r.status }).toEqual({ label, status: statusOf(label) });
        // reads and refusals are stored with the next batch: wait for this request's
        let got = await doors(id);
        for (let i = 0; i < 50 && got.length < expected.length; i++) {
          await sleep(100);
          got = await doors(id);
        }
        expect({ label, events: [...got].sort() }).toEqual({
          label,
          events: [...expected].sort(),
        });
      }
    });

    it('no event of a request lacks its door', async () => {
      const doorless = (await all()).filter((e) => e.requestId !== null && e.door === null);
      expect(doorless.map((e) => `${e.type} ${e.requestId}`)).toEqual([]);
    });
  });

  describe('aggregation of unauthenticated failures', () => {
    it('50 rapid failures from one address become a few rows whose counts add up to 50', async () => {
      const ip = freshIp();
      const bogus = `sht_${'A'.repeat(43)}`;
      secrets.add(bogus);
      const replies = await Promise.all(
        Array.from({ length: 50 }, () => call(bogus, 'GET', '/v1/units', undefined, { ip })),
      );
      expect(replies.map((r) => r.status)).toEqual(Array(50).fill(401));
      const rows = (await all('type=auth.failed&principal=anonymous')).filter(
        (e) => e.clientIp === ip,
      );
      const total = rows.reduce((n, e) => n + e.count, 0);
      expect(total).toBe(50);
      expect(rows.length).toBeLessThanOrEqual(5);
      for (const e of rows)
        expect(e).toMatchObject({
          decision: 'denied',
          details: { reason: expect.stringMatching(/unknown token/) },
        });
      console.log(
        `audit: 50 unauthenticated failures from one address stored as ${rows.length} row(s)`,
      );
    });

    it('failures from different addresses are not merged', async () => {
      const a = freshIp();
      const b = freshIp();
      const bogus = `sht_${'B'.repeat(43)}`;
      secrets.add(bogus);
      await Promise.all([
        ...Array.from({ length: 5 }, () => call(bogus, 'GET', '/v1/units', undefined, { ip: a })),
        ...Array.from({ length: 7 }, () => call(bogus, 'GET', '/v1/units', undefined, { ip: b })),
      ]);
      const rows = await all('type=auth.failed');
      const sum = (ip: string) =>
        rows.filter((e) => e.clientIp === ip).reduce((n, e) => n + e.count, 0);
      expect([sum(a), sum(b)]).toEqual([5, 7]);
    });
  });

  describe('filters and pagination', () => {
    let t0: string;
    let t1: string;
    const unit = 'team/filtered';

    beforeAll(async () => {
      await sleep(20);
      t0 = new Date().toISOString();
      await sleep(20);
      for (let s = 1; s <= 7; s++) {
        const r = await send(
          'POST',
          `/v1/backend/${unit}`,
          { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' },
          tfState(s, 'filtered'),
        );
        expect(r.status).toBe(200);
      }
      expect(
        (await send('GET', `/v1/backend/${unit}`, { authorization: `Bearer ${tok.reader}` }))
          .status,
      ).toBe(200);
      await sleep(20);
      t1 = new Date().toISOString();
      await sleep(20);
      expect(
        (await send('GET', `/v1/backend/${unit}`, { authorization: `Bearer ${tok.writer}` }))
          .status,
      ).toBe(200);
    });

    it('by principal, resource, action and type', async () => {
      const byPrincipal = await all('principal=svc:reader');
      expect(byPrincipal.length).toBeGreaterThan(0);
      expect(new Set(byPrincipal.map((e) => e.principal))).toEqual(new Set(['svc:reader']));
      const byResource = await all(`resource=${enc(unit)}`);
      expect(new Set(byResource.map((e) => e.resource))).toEqual(new Set([unit]));
      expect(byResource.filter((e) => e.type === 'state.write')).toHaveLength(7);
      const byAction = await all(`action=unit.write&resource=${enc(unit)}`);
      expect(byAction).toHaveLength(7);
      expect(byAction.every((e) => e.action === 'unit.write')).toBe(true);
      const byType = await all(`type=state.read&resource=${enc(unit)}`);
      expect(byType.map((e) => e.principal).sort()).toEqual(['svc:reader', 'svc:writer']);
      expect(await all('principal=svc:no-such-principal')).toEqual([]);
    });

    it('by time: since (inclusive) and until (exclusive)', async () => {
      const within = await all(`resource=${enc(unit)}&since=${t0}&until=${t1}`);
      expect(within.map((e) => `${e.type} ${e.principal}`).sort()).toEqual(
        [...Array(7).fill('state.write bootstrap-admin'), 'state.read svc:reader'].sort(),
      );
      for (const e of within) {
        expect(e.at >= t0).toBe(true);
        expect(e.at < t1).toBe(true);
      }
      expect(await all(`resource=${enc(unit)}&until=${t0}`)).toEqual([]);
      const after = await all(`resource=${enc(unit)}&since=${t1}`);
      expect(after.map((e) => `${e.type} ${e.principal}`)).toEqual(['state.read svc:writer']);
    });

    it('cursor pagination: newest first, every event once, pages of the asked size', async () => {
      const everything = await all(`resource=${enc(unit)}`);
      expect(everything.length).toBe(9);
      const ids: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const p = await page(`resource=${enc(unit)}&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
        expect(p.items.length).toBeLessThanOrEqual(2);
        ids.push(...p.items.map((e) => e.id));
        cursor = p.nextCursor;
        pages++;
      } while (cursor !== null && pages < 20);
      expect(pages).toBe(5);
      expect(ids).toEqual(everything.map((e) => e.id));
      const numeric = ids.map(Number);
      expect([...numeric].sort((a, b) => b - a)).toEqual(numeric);
      expect(new Set(ids).size).toBe(ids.length);
    });

    it('refuses a bad cursor, an empty time window and an oversized page with a 400', async () => {
      for (const q of [
        'cursor=abc',
        `since=${t1}&until=${t0}`,
        'limit=0',
        'limit=5000',
        'since=yesterday',
      ]) {
        const r = await call(tok.auditor, 'GET', `/v1/audit?${q}`);
        expect({ q, status: r.status }).toEqual({ q, status: 400 });
        expect(JSON.parse(r.text)).toMatchObject({ code: 'invalid_request' });
      }
    });
  });

  describe('no secrets and no state content', () => {
    it('no audit row holds a token, an S3 secret or session token, a signature, or state content', async () => {
      const rows = await all();
      expect(rows.length).toBeGreaterThan(50);
      const text = JSON.stringify(rows);
      const found = [...secrets].filter((s) => s.length >= 16 && text.includes(s));
      expect(found).toEqual([]);
      expect(text).not.toContain(STATE_MARKER);
      expect(text).not.toContain('null_resource');
      expect(text).not.toMatch(/sht_[A-Za-z0-9_-]{20,}/);
      expect(text).not.toMatch(/Signature=/);
      // every row has the fixed shape
      for (const e of rows) {
        expect(Object.keys(e).sort()).toEqual([
          'action',
          'at',
          'clientIp',
          'count',
          'decision',
          'details',
          'door',
          'id',
          'principal',
          'requestId',
          'resource',
          'type',
          'workspace',
        ]);
        expect(['success', 'denied', 'failure']).toContain(e.decision);
      }
    });
  });
});
