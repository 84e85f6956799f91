import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { IncomingHttpHeaders, request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { freshServerEnv } from '../support/database';
import { FIXTURES } from '../support/paths';
import {
  expectCurrentState,
  RunningServer,
  spawnServer,
  versionNumbersOf,
} from '../support/server';
import { tfState } from '../support/services';
import { simpleFixture } from '../support/tf-state';

/**
 * Terraform's `backend "http"` door, `/v1/backend/<unit…>`, driven over real sockets against
 * the real `statehouse serve` process. Every refusal is checked three ways: status, JSON (or
 * LockInfo) body, and — through the management API — that nothing was stored or changed.
 */

jest.setTimeout(60_000);

const { bytes: SIMPLE, lineage: SIMPLE_LINEAGE, serial: SIMPLE_SERIAL } = simpleFixture();
const SIMPLE_SECRET = 's3cr3t-not-real'; // a sensitive output value inside simple.tfstate

interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  text: string;
}

interface SendOptions {
  headers?: Record<string, string>;
  /** Sent with a Content-Length. */
  body?: string | Buffer;
  /** Sent with `Transfer-Encoding: chunked`; an empty list sends a zero-length chunked body. */
  chunks?: (string | Buffer)[];
}

/**
 * One request with node:http and the path exactly as given (fetch would normalise `..`,
 * `%2E%2E` and friends, and cannot send LOCK/UNLOCK or a chunked empty body).
 */
function send(
  server: RunningServer,
  method: string,
  path: string,
  opts: SendOptions = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    let responded = false;
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port: server.port,
        method,
        path,
        headers: opts.headers ?? {},
        agent: false,
      },
      (res) => {
        responded = true;
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const body = Buffer.concat(parts);
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body,
            text: body.toString('utf8'),
          });
        });
      },
    );
    // A server that answers early (413) and closes may cut our upload: the answer still counts.
    // A connection cut before any answer is reported as status 0, so the test says what it got.
    req.on('error', (e) => {
      if (responded) return;
      const text = `<no answer: ${e.message}>`;
      resolve({ status: 0, headers: {}, body: Buffer.from(text), text });
    });
    if (opts.chunks !== undefined) {
      req.setHeader('Transfer-Encoding', 'chunked');
      for (const c of opts.chunks) req.write(c);
      req.end();
    } else if (opts.body !== undefined) {
      const b = Buffer.isBuffer(opts.body) ? opts.body : Buffer.from(opts.body);
      req.setHeader('Content-Length', String(b.length));
      req.end(b);
    } else {
      req.end();
    }
  });
}

function json(reply: Reply): Record<string, unknown> {
  expect(reply.headers['content-type']).toMatch(/^application\/json/);
  return JSON.parse(reply.text) as Record<string, unknown>;
}

const md5 = (b: string | Buffer): string => createHash('md5').update(b).digest('base64');

/** Terraform's LockInfo, compact, as `terraform` sends it. */
function lockInfo(id: string, who = 'ci@runner'): string {
  return `{"ID":"${id}","Operation":"OperationTypeApply","Info":"","Who":"${who}","Version":"1.11.4","Created":"2026-01-02T03:04:05.123456789Z","Path":""}`;
}

/**
 * A holder LockInfo with unusual spacing, key order and a non-ASCII character: a server that
 * re-serialised it instead of keeping the bytes as sent would be caught.
 */
function oddLockInfo(id: string): string {
  return `{ "Who": "ana@laptop",  "ID": "${id}", "Operation": "OperationTypeApply", "Info": "plan — état", "Version": "1.11.4", "Created": "2026-01-02T03:04:05.123456789Z", "Path": "" }`;
}

/** A Terraform v4 state of exactly `size` bytes (padded through an output value). */
function stateOfSize(size: number, serial = 1, lineage = 'lineage-big'): Buffer {
  const base = Buffer.byteLength(tfState(serial, lineage, { pad: '' }));
  const body = Buffer.from(tfState(serial, lineage, { pad: 'x'.repeat(size - base) }));
  expect(body.length).toBe(size);
  return body;
}

describe('Terraform HTTP backend door (/v1/backend/<unit…>)', () => {
  let server: RunningServer;
  let small: RunningServer; // STATEHOUSE_MAX_STATE_BYTES=64KiB
  const cleanups: (() => Promise<void>)[] = [];
  let counter = 0;

  /** A unit name no other test uses (with a slash, as real unit names have). */
  const unique = (label: string): string => `hb/${label}-${++counter}`;

  beforeAll(async () => {
    const [a, b] = await Promise.all([freshServerEnv(), freshServerEnv()]);
    cleanups.push(a.cleanup, b.cleanup);
    [server, small] = await Promise.all([
      spawnServer(a.env),
      spawnServer({ ...b.env, STATEHOUSE_MAX_STATE_BYTES: '64KiB' }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([server?.stop(), small?.stop()]);
    for (const c of cleanups) await c();
  });

  const bearer = (s: RunningServer = server): Record<string, string> => ({
    Authorization: `Bearer ${s.token}`,
  });
  const basic = (user: string, password: string): Record<string, string> => ({
    Authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`,
  });

  /** `/v1/backend/<name>` with an optional raw query. */
  const bpath = (name: string, query = ''): string =>
    `/v1/backend/${name}${query === '' ? '' : `?${query}`}`;

  function backend(
    method: string,
    name: string,
    opts: SendOptions & { query?: string; s?: RunningServer } = {},
  ): Promise<Reply> {
    const s = opts.s ?? server;
    return send(s, method, bpath(name, opts.query), {
      ...opts,
      headers: { ...bearer(s), ...opts.headers },
    });
  }

  /** POST a state the way Terraform does (Content-Type and a correct Content-MD5). */
  function post(
    name: string,
    body: string | Buffer,
    opts: { query?: string; method?: string; s?: RunningServer } = {},
  ): Promise<Reply> {
    return backend(opts.method ?? 'POST', name, {
      query: opts.query,
      s: opts.s,
      body,
      headers: { 'Content-Type': 'application/json', 'Content-MD5': md5(body) },
    });
  }

  // ---------------------------------------------------------------- checks through the API

  async function api(
    path: string,
    s: RunningServer = server,
  ): Promise<{ status: number; body: Buffer; json: () => Record<string, unknown> }> {
    const r = await fetch(`${s.url}${path}`, { headers: bearer(s) });
    const body = Buffer.from(await r.arrayBuffer());
    return {
      status: r.status,
      body,
      json: () => JSON.parse(body.toString('utf8')) as Record<string, unknown>,
    };
  }

  const enc = encodeURIComponent;
  const wsq = (workspace?: string): string => (workspace ? `?workspace=${workspace}` : '');

  /** The unit was never created: no unit, no versions. */
  async function expectNoUnit(name: string, s: RunningServer = server): Promise<void> {
    const unit = await api(`/v1/units/${enc(name)}`, s);
    expect(unit.status).toBe(404);
    expect(unit.json()).toMatchObject({ code: 'unit_not_found' });
    const versions = await api(`/v1/units/${enc(name)}/versions`, s);
    expect(versions.status).toBe(404);
    expect(versions.json()).toMatchObject({ code: 'unit_not_found' });
  }

  const versionNumbers = (
    name: string,
    workspace?: string,
    s: RunningServer = server,
  ): Promise<number[]> => versionNumbersOf(s, name, workspace);

  const expectState = (name: string, bytes: string | Buffer, workspace?: string): Promise<void> =>
    expectCurrentState(server, name, bytes, workspace);

  async function expectNoState(name: string, workspace?: string): Promise<void> {
    const r = await api(`/v1/units/${enc(name)}/state${wsq(workspace)}`);
    expect(r.status).toBe(404);
    expect(r.json()).toMatchObject({ code: 'state_not_found' });
  }

  async function expectUnlocked(name: string, workspace?: string): Promise<void> {
    const r = await api(`/v1/units/${enc(name)}/lock${wsq(workspace)}`);
    expect(r.status).toBe(404);
    expect(r.json()).toMatchObject({ code: 'lock_not_found' });
  }

  async function expectLockedBy(name: string, id: string, infoJson: string, workspace?: string) {
    const r = await api(`/v1/units/${enc(name)}/lock${wsq(workspace)}`);
    expect(r.status).toBe(200);
    expect(r.json()).toMatchObject({
      id,
      principal: 'bootstrap-admin',
      info: JSON.parse(infoJson) as unknown,
    });
  }

  async function allUnitNames(): Promise<string[]> {
    const r = await api('/v1/units?limit=1000');
    expect(r.status).toBe(200);
    return (r.json().items as { name: string }[]).map((u) => u.name);
  }

  /** A lock held by bootstrap-admin on `name`, with the LockInfo bytes it was taken with. */
  async function locked(name: string, id: string, info = lockInfo(id), query = '') {
    const r = await backend('LOCK', name, { body: info, query });
    expect(r.status).toBe(200);
    return info;
  }

  // ---------------------------------------------------------------- authentication

  describe('authentication', () => {
    it('refuses a request without Authorization with 401 JSON, a Basic challenge, and stores nothing', async () => {
      const name = unique('noauth');
      const r = await send(server, 'POST', bpath(name), {
        body: SIMPLE,
        headers: { 'Content-Type': 'application/json' },
      });
      expect(r.status).toBe(401);
      expect(r.headers['www-authenticate']).toMatch(/^Basic /);
      expect(json(r)).toMatchObject({ statusCode: 401, code: 'unauthenticated' });
      const lock = await send(server, 'LOCK', bpath(name), { body: lockInfo('L-noauth') });
      expect(lock.status).toBe(401);
      expect(json(lock)).toMatchObject({ code: 'unauthenticated' });
      await expectNoUnit(name);
    });

    it('accepts the token as a Bearer token', async () => {
      const name = unique('bearer');
      const w = await send(server, 'POST', bpath(name), { body: SIMPLE, headers: bearer() });
      expect(w.status).toBe(200);
      const r = await send(server, 'GET', bpath(name), { headers: bearer() });
      expect(r.status).toBe(200);
      expect(r.body.equals(SIMPLE)).toBe(true);
    });

    it('accepts Basic auth with any non-empty username and the token as password', async () => {
      const name = unique('basic');
      const w = await send(server, 'POST', bpath(name), {
        body: SIMPLE,
        headers: basic('terraform', server.token),
      });
      expect(w.status).toBe(200);
      for (const user of ['terraform', 'x', 'anything at all']) {
        const r = await send(server, 'GET', bpath(name), { headers: basic(user, server.token) });
        expect(r.status).toBe(200);
        expect(r.body.equals(SIMPLE)).toBe(true);
      }
    });

    it.each([
      ['an empty username', '', 'TOKEN'],
      ['a wrong password', 'terraform', 'not-the-token-0123456789abcdefghijkl'],
      ['an empty password', 'terraform', ''],
    ])('refuses Basic auth with %s (401 JSON) and stores nothing', async (_label, user, pw) => {
      const name = unique('basic-bad');
      const password = pw === 'TOKEN' ? server.token : pw;
      const r = await send(server, 'POST', bpath(name), {
        body: SIMPLE,
        headers: basic(user, password),
      });
      expect(r.status).toBe(401);
      expect(r.headers['www-authenticate']).toMatch(/^Basic /);
      expect(json(r)).toMatchObject({ statusCode: 401, code: 'unauthenticated' });
      await expectNoUnit(name);
    });

    it('refuses a wrong Bearer token with 401 JSON', async () => {
      const name = unique('bearer-bad');
      const r = await send(server, 'GET', bpath(name), {
        headers: { Authorization: 'Bearer wrong-token-0123456789abcdefghijklmnop' },
      });
      expect(r.status).toBe(401);
      expect(json(r)).toMatchObject({ code: 'unauthenticated' });
      await expectNoUnit(name);
    });
  });

  // ---------------------------------------------------------------- reading and writing

  describe('state reads and writes', () => {
    it('GET of a unit with no state answers 404 and creates nothing', async () => {
      const name = unique('nostate');
      const r = await backend('GET', name);
      expect(r.status).toBe(404);
      expect(json(r)).toMatchObject({ statusCode: 404, code: 'state_not_found' });
      const head = await backend('HEAD', name);
      expect(head.status).toBe(404);
      await expectNoUnit(name);
    });

    it('POST stores the fixture and GET returns the exact bytes; HEAD gives the exact length', async () => {
      const name = unique('roundtrip');
      const w = await post(name, SIMPLE);
      expect(w.status).toBe(200);
      expect(json(w)).toMatchObject({
        created: true,
        version: {
          version: 1,
          serial: SIMPLE_SERIAL,
          lineage: SIMPLE_LINEAGE,
          size: SIMPLE.length,
        },
      });
      const r = await backend('GET', name);
      expect(r.status).toBe(200);
      expect(r.headers['content-type']).toMatch(/^application\/json/);
      expect(r.headers['content-length']).toBe(String(SIMPLE.length));
      expect(r.headers['content-md5']).toBe(md5(SIMPLE));
      expect(r.body.equals(SIMPLE)).toBe(true);
      const head = await backend('HEAD', name);
      expect(head.status).toBe(200);
      expect(head.headers['content-length']).toBe(String(SIMPLE.length));
      expect(head.body.length).toBe(0);
      expect(await versionNumbers(name)).toEqual([1]);
    });

    it('PUT writes like POST', async () => {
      const name = unique('put');
      const w = await post(name, SIMPLE, { method: 'PUT' });
      expect(w.status).toBe(200);
      expect(json(w)).toMatchObject({
        created: true,
        version: { version: 1, serial: SIMPLE_SERIAL },
      });
      const next = tfState(SIMPLE_SERIAL + 1, SIMPLE_LINEAGE);
      const w2 = await post(name, next, { method: 'PUT' });
      expect(w2.status).toBe(200);
      expect(json(w2)).toMatchObject({
        created: true,
        version: { version: 2, serial: SIMPLE_SERIAL + 1 },
      });
      const r = await backend('GET', name);
      expect(r.text).toBe(next);
      expect(await versionNumbers(name)).toEqual([2, 1]);
    });

    it('a byte-identical re-POST answers 200 and creates no version', async () => {
      const name = unique('identical');
      expect((await post(name, SIMPLE)).status).toBe(200);
      const again = await post(name, SIMPLE);
      expect(again.status).toBe(200);
      expect(json(again)).toMatchObject({ created: false, version: { version: 1 } });
      expect(await versionNumbers(name)).toEqual([1]);
      await expectState(name, SIMPLE);
    });

    it('a higher serial in the same lineage is accepted as a new version', async () => {
      const name = unique('serial-up');
      expect((await post(name, SIMPLE)).status).toBe(200);
      const next = tfState(SIMPLE_SERIAL + 1, SIMPLE_LINEAGE);
      const w = await post(name, next);
      expect(w.status).toBe(200);
      expect(json(w)).toMatchObject({
        created: true,
        version: { version: 2, serial: SIMPLE_SERIAL + 1 },
      });
      expect(await versionNumbers(name)).toEqual([2, 1]);
      await expectState(name, next);
    });

    it('stores an OpenTofu encrypted state opaque and returns it byte for byte', async () => {
      const name = unique('encrypted');
      const raw = readFileSync(join(FIXTURES, 'opentofu-encrypted.HANDMADE.tfstate'));
      const w = await post(name, raw);
      expect(w.status).toBe(200);
      expect(json(w)).toMatchObject({
        created: true,
        version: { version: 1, encrypted: true, serial: null, lineage: null, size: raw.length },
      });
      const r = await backend('GET', name);
      expect(r.status).toBe(200);
      expect(r.body.equals(raw)).toBe(true);
    });

    it('after a DELETE, a new POST starts the state again as the next version', async () => {
      const name = unique('after-delete');
      expect((await post(name, SIMPLE)).status).toBe(200);
      expect((await backend('DELETE', name)).status).toBe(200);
      const older = tfState(1, SIMPLE_LINEAGE);
      const w = await post(name, older);
      expect(w.status).toBe(200);
      expect(json(w)).toMatchObject({ created: true, version: { version: 2, serial: 1 } });
      const r = await backend('GET', name);
      expect(r.text).toBe(older);
      expect(await versionNumbers(name)).toEqual([2, 1]);
    });

    it('two concurrent writes of the same serial with different bytes: exactly one wins', async () => {
      const name = unique('race-write');
      expect((await post(name, SIMPLE)).status).toBe(200);
      const a = tfState(SIMPLE_SERIAL + 1, SIMPLE_LINEAGE, { who: 'a' });
      const b = tfState(SIMPLE_SERIAL + 1, SIMPLE_LINEAGE, { who: 'b' });
      const [ra, rb] = await Promise.all([post(name, a), post(name, b)]);
      expect([ra.status, rb.status].sort()).toEqual([200, 409]);
      const loser = ra.status === 409 ? ra : rb;
      expect(json(loser)).toMatchObject({ code: 'serial_conflict' });
      const winner = ra.status === 200 ? a : b;
      expect(await versionNumbers(name)).toEqual([2, 1]);
      await expectState(name, winner);
    });

    it('?workspace=dev selects another workspace of the same unit', async () => {
      const name = unique('workspace');
      const dev = tfState(1, 'lineage-dev');
      const w = await post(name, dev, { query: 'workspace=dev' });
      expect(w.status).toBe(200);
      const r = await backend('GET', name, { query: 'workspace=dev' });
      expect(r.status).toBe(200);
      expect(r.text).toBe(dev);
      const def = await backend('GET', name);
      expect(def.status).toBe(404);
      expect(json(def)).toMatchObject({ code: 'state_not_found' });
      expect(await versionNumbers(name, 'dev')).toEqual([1]);

      // A lock on dev does not lock default.
      const info = await locked(name, 'L-dev', lockInfo('L-dev'), 'workspace=dev');
      await expectLockedBy(name, 'L-dev', info, 'dev');
      await expectUnlocked(name);
      expect((await post(name, SIMPLE)).status).toBe(200);
      await expectState(name, SIMPLE);
      await expectState(name, dev, 'dev');
      const unlock = await backend('UNLOCK', name, { query: 'workspace=dev', body: info });
      expect(unlock.status).toBe(200);
      await expectUnlocked(name, 'dev');
    });

    it('a unit created on first use through ?workspace=dev also has its default workspace', async () => {
      const name = unique('workspace-first-use');
      expect((await post(name, tfState(1, 'lineage-dev'), { query: 'workspace=dev' })).status).toBe(
        200,
      );
      const ws = await api(`/v1/units/${enc(name)}/workspaces`);
      expect(ws.status).toBe(200);
      const list = JSON.parse(ws.body.toString()) as {
        workspace: string;
        currentVersion: number;
      }[];
      expect(list.find((x) => x.workspace === 'dev')).toMatchObject({ currentVersion: 1 });
      // A unit always has the `default` workspace.
      expect(list.map((x) => x.workspace).sort()).toEqual(['default', 'dev']);
    });

    it('refuses an invalid workspace name with 400 invalid_name and stores nothing', async () => {
      const name = unique('bad-ws');
      const r = await post(name, SIMPLE, { query: 'workspace=a%2Fb' });
      expect(r.status).toBe(400);
      expect(json(r)).toMatchObject({
        code: 'invalid_name',
        message: expect.stringMatching(/workspace/),
      });
      await expectNoUnit(name);
    });
  });

  // ---------------------------------------------------------------- bad bodies

  describe('bad bodies are refused and store nothing', () => {
    it('invalid JSON → 400 invalid_state', async () => {
      const name = unique('badjson');
      const r = await post(name, '{"version": 4, "serial": ');
      expect(r.status).toBe(400);
      expect(json(r)).toMatchObject({ statusCode: 400, code: 'invalid_state' });
      await expectNoUnit(name);
    });

    it('an empty body → 400 invalid_state', async () => {
      const name = unique('empty-body');
      const r = await post(name, '');
      expect(r.status).toBe(400);
      expect(json(r)).toMatchObject({ statusCode: 400, code: 'invalid_state' });
      await expectNoUnit(name);
    });

    it('JSON that is not a state → 400 invalid_state', async () => {
      const name = unique('notstate');
      const r = await post(name, '{"hello":"world"}');
      expect(r.status).toBe(400);
      expect(json(r)).toMatchObject({ statusCode: 400, code: 'invalid_state' });
      await expectNoUnit(name);
    });

    it('an invalid body on a unit with state leaves the current state and versions alone', async () => {
      const name = unique('badjson-existing');
      expect((await post(name, SIMPLE)).status).toBe(200);
      const r = await post(name, '[1,2,3]');
      expect(r.status).toBe(400);
      expect(json(r)).toMatchObject({ code: 'invalid_state' });
      expect(await versionNumbers(name)).toEqual([1]);
      await expectState(name, SIMPLE);
    });

    it('a Content-MD5 that does not match the body → 400 checksum_mismatch', async () => {
      const name = unique('md5');
      const r = await backend('POST', name, {
        body: SIMPLE,
        headers: { 'Content-Type': 'application/json', 'Content-MD5': md5('something else') },
      });
      expect(r.status).toBe(400);
      expect(json(r)).toMatchObject({ statusCode: 400, code: 'checksum_mismatch' });
      await expectNoUnit(name);
    });

    it('a lower serial in the same lineage → 409 serial_conflict', async () => {
      const name = unique('serial-lower');
      expect((await post(name, SIMPLE)).status).toBe(200);
      const r = await post(name, tfState(SIMPLE_SERIAL - 1, SIMPLE_LINEAGE));
      expect(r.status).toBe(409);
      expect(json(r)).toMatchObject({ statusCode: 409, code: 'serial_conflict' });
      expect(await versionNumbers(name)).toEqual([1]);
      await expectState(name, SIMPLE);
    });

    it('the same serial with different bytes → 409 serial_conflict', async () => {
      const name = unique('serial-same');
      expect((await post(name, SIMPLE)).status).toBe(200);
      const r = await post(name, tfState(SIMPLE_SERIAL, SIMPLE_LINEAGE));
      expect(r.status).toBe(409);
      expect(json(r)).toMatchObject({ statusCode: 409, code: 'serial_conflict' });
      expect(await versionNumbers(name)).toEqual([1]);
      await expectState(name, SIMPLE);
    });

    describe('with STATEHOUSE_MAX_STATE_BYTES=64KiB', () => {
      const LIMIT = 64 * 1024;

      it('accepts a state of exactly the limit', async () => {
        const name = unique('at-limit');
        const body = stateOfSize(LIMIT);
        const r = await post(name, body, { s: small });
        expect(r.status).toBe(200);
        expect(json(r)).toMatchObject({ created: true, version: { size: LIMIT } });
        expect(await versionNumbers(name, undefined, small)).toEqual([1]);
      });

      it('refuses a larger body sent with Content-Length: 413 too_large', async () => {
        const name = unique('too-large-cl');
        const r = await post(name, stateOfSize(LIMIT + 1), { s: small });
        expect(r.status).toBe(413);
        expect(json(r)).toMatchObject({ statusCode: 413, code: 'too_large' });
        await expectNoUnit(name, small);
      });

      it('refuses a larger body sent chunked: 413 too_large', async () => {
        const name = unique('too-large-chunked');
        const body = stateOfSize(3 * LIMIT);
        const pieces = [
          body.subarray(0, 40_000),
          body.subarray(40_000, 120_000),
          body.subarray(120_000),
        ];
        const r = await send(small, 'POST', bpath(name), {
          chunks: pieces,
          headers: { ...bearer(small), 'Content-Type': 'application/json' },
        });
        expect(r.status).toBe(413);
        expect(json(r)).toMatchObject({ statusCode: 413, code: 'too_large' });
        await expectNoUnit(name, small);
      });

      it('refuses a larger body on a unit with state and keeps the current state', async () => {
        const name = unique('too-large-existing');
        const first = tfState(1, 'lineage-big');
        expect((await post(name, first, { s: small })).status).toBe(200);
        const r = await post(name, stateOfSize(LIMIT + 100, 2), { s: small });
        expect(r.status).toBe(413);
        expect(json(r)).toMatchObject({ code: 'too_large' });
        expect(await versionNumbers(name, undefined, small)).toEqual([1]);
        const cur = await api(`/v1/units/${enc(name)}/state`, small);
        expect(cur.body.toString()).toBe(first);
      });
    });
  });

  // ---------------------------------------------------------------- unit names in the raw URL

  describe('bad unit names in the raw URL', () => {
    it.each([
      ['an encoded "/" inside a segment', 'bn/a%2Fb', /encoded "\/"/],
      ['a ".." segment', 'bn/a/../b', /"\." or "\.\." segment/],
      ['a percent-encoded ".." segment', 'bn/a/%2E%2E/b', /"\." or "\.\." segment/],
      ['a "." segment', 'bn/a/./b', /"\." or "\.\." segment/],
      ['an empty segment', 'bn/a//b', /empty segment/],
      ['a trailing slash', 'bn/a/b/', /empty segment/],
      ['a name ending in terraform.tfstate', 'bn/app/terraform.tfstate', /terraform\.tfstate/],
      ['a space (%20)', 'bn/a%20b', /letters, digits/],
      ['a non-ASCII letter', 'bn/%C3%A9t%C3%A9', /letters, digits/],
      ['a malformed percent-encoding', 'bn/a%ZZb', /percent-encoding/],
    ])('%s → 400 invalid_name naming the rule, nothing stored', async (_label, raw, rule) => {
      const before = await allUnitNames();
      const w = await post(raw, SIMPLE);
      expect(w.status).toBe(400);
      expect(json(w)).toMatchObject({
        statusCode: 400,
        code: 'invalid_name',
        message: expect.stringMatching(rule),
      });
      const lock = await backend('LOCK', raw, { body: lockInfo('L-badname') });
      expect(lock.status).toBe(400);
      expect(json(lock)).toMatchObject({
        code: 'invalid_name',
        message: expect.stringMatching(rule),
      });
      const get = await backend('GET', raw);
      expect(get.status).toBe(400);
      expect(json(get)).toMatchObject({ code: 'invalid_name' });
      expect(await allUnitNames()).toEqual(before);
    });

    it('an empty unit name (/v1/backend/) → 400 invalid_name', async () => {
      const before = await allUnitNames();
      const r = await send(server, 'POST', '/v1/backend/', { body: SIMPLE, headers: bearer() });
      expect(r.status).toBe(400);
      expect(json(r)).toMatchObject({
        code: 'invalid_name',
        message: expect.stringMatching(/empty/),
      });
      expect(await allUnitNames()).toEqual(before);
    });

    it('a unit name with slashes addresses one unit, not a path of units', async () => {
      const name = unique('deep/er/still');
      expect((await post(name, SIMPLE)).status).toBe(200);
      const unit = await api(`/v1/units/${enc(name)}`);
      expect(unit.status).toBe(200);
      expect(unit.json()).toMatchObject({ name });
      await expectState(name, SIMPLE);
    });
  });

  // ---------------------------------------------------------------- the lock authority table

  describe('LOCK / UNLOCK (lock authority)', () => {
    it('LOCK on a free state → 200 and the lock is held with the LockInfo as sent', async () => {
      const name = unique('lock');
      const info = lockInfo('L-1');
      const r = await backend('LOCK', name, { body: info });
      expect(r.status).toBe(200);
      expect(r.text).toBe(info);
      await expectLockedBy(name, 'L-1', info);
      // A unit appears on first use.
      const unit = await api(`/v1/units/${enc(name)}`);
      expect(unit.status).toBe(200);
    });

    it('a retried LOCK by the same principal with the same ID → 200 again', async () => {
      const name = unique('lock-retry');
      const info = await locked(name, 'L-retry');
      const again = await backend('LOCK', name, { body: info });
      expect(again.status).toBe(200);
      expect(again.text).toBe(info);
      await expectLockedBy(name, 'L-retry', info);
    });

    it('LOCK with another ID → 423 whose body is the holder’s LockInfo byte for byte', async () => {
      const name = unique('lock-conflict');
      const holder = oddLockInfo('L-holder');
      await locked(name, 'L-holder', holder);
      const r = await backend('LOCK', name, { body: lockInfo('L-other', 'bob@elsewhere') });
      expect(r.status).toBe(423);
      expect(r.headers['content-type']).toMatch(/^application\/json/);
      expect(r.body.equals(Buffer.from(holder))).toBe(true);
      await expectLockedBy(name, 'L-holder', holder);
    });

    it('LOCK with a body that is not a LockInfo → 400 and no lock', async () => {
      const name = unique('lock-bad');
      for (const body of ['not json', '{"Operation":"OperationTypeApply"}', '[]']) {
        const r = await backend('LOCK', name, { body });
        expect(r.status).toBe(400);
        expect(json(r)).toMatchObject({ code: 'invalid_request' });
      }
      await expectNoUnit(name);
    });

    it('a LockInfo larger than 64 KiB → 413 and no lock', async () => {
      const name = unique('lock-huge');
      const body = lockInfo('L-huge', 'x'.repeat(70 * 1024));
      const r = await backend('LOCK', name, { body });
      expect(r.status).toBe(413);
      expect(json(r)).toMatchObject({ code: 'too_large' });
      await expectNoUnit(name);
    });

    it('ten concurrent LOCKs with different IDs: exactly one 200, the others 423 with its LockInfo', async () => {
      const name = unique('lock-race');
      const infos = Array.from({ length: 10 }, (_, i) => lockInfo(`L-race-${i}`));
      const replies = await Promise.all(infos.map((body) => backend('LOCK', name, { body })));
      const won = replies.filter((r) => r.status === 200);
      expect(won).toHaveLength(1);
      expect(replies.filter((r) => r.status === 423)).toHaveLength(9);
      const winner = won[0].text;
      for (const r of replies) expect(r.text).toBe(winner);
      const winnerId = (JSON.parse(winner) as { ID: string }).ID;
      await expectLockedBy(name, winnerId, winner);
    });

    it('POST ?ID=<holder id> while locked → 200 and a new version', async () => {
      const name = unique('write-locked');
      await locked(name, 'L-w');
      const w = await post(name, SIMPLE, { query: 'ID=L-w' });
      expect(w.status).toBe(200);
      expect(json(w)).toMatchObject({ created: true, version: { version: 1 } });
      await expectState(name, SIMPLE);
    });

    it('POST without an ID while locked → 409 with the holder’s LockInfo; nothing stored', async () => {
      const name = unique('write-noid');
      const holder = oddLockInfo('L-noid');
      await locked(name, 'L-noid', holder);
      const r = await post(name, SIMPLE);
      expect(r.status).toBe(409);
      expect(r.body.equals(Buffer.from(holder))).toBe(true);
      expect(await versionNumbers(name)).toEqual([]);
      await expectNoState(name);
      await expectLockedBy(name, 'L-noid', holder);
    });

    it('POST with a wrong ID while locked → 409 with the holder’s LockInfo; nothing stored', async () => {
      const name = unique('write-wrongid');
      const holder = oddLockInfo('L-right');
      await locked(name, 'L-right', holder);
      expect((await post(name, SIMPLE, { query: 'ID=L-right' })).status).toBe(200);
      const r = await post(name, tfState(SIMPLE_SERIAL + 1, SIMPLE_LINEAGE), {
        query: 'ID=L-wrong',
      });
      expect(r.status).toBe(409);
      expect(r.body.equals(Buffer.from(holder))).toBe(true);
      expect(await versionNumbers(name)).toEqual([1]);
      await expectState(name, SIMPLE);
    });

    it('POST naming a lock that is not held → 409 lock_not_held; nothing stored', async () => {
      const name = unique('write-notheld');
      const r = await post(name, SIMPLE, { query: 'ID=L-ghost' });
      expect(r.status).toBe(409);
      expect(json(r)).toMatchObject({ statusCode: 409, code: 'lock_not_held' });
      await expectNoUnit(name);
    });

    it('POST naming a lock that was released → 409 lock_not_held; the state is unchanged', async () => {
      const name = unique('write-released');
      const info = await locked(name, 'L-gone');
      expect((await post(name, SIMPLE, { query: 'ID=L-gone' })).status).toBe(200);
      expect((await backend('UNLOCK', name, { body: info })).status).toBe(200);
      const r = await post(name, tfState(SIMPLE_SERIAL + 1, SIMPLE_LINEAGE), {
        query: 'ID=L-gone',
      });
      expect(r.status).toBe(409);
      expect(json(r)).toMatchObject({ code: 'lock_not_held' });
      expect(await versionNumbers(name)).toEqual([1]);
      await expectState(name, SIMPLE);
    });

    it('UNLOCK with the holder’s LockInfo → 200 and the lock is gone', async () => {
      const name = unique('unlock');
      const info = await locked(name, 'L-u');
      const r = await backend('UNLOCK', name, { body: info });
      expect(r.status).toBe(200);
      await expectUnlocked(name);
      // Free again: someone else's ID can lock now.
      expect((await backend('LOCK', name, { body: lockInfo('L-next') })).status).toBe(200);
    });

    it('a retried UNLOCK whose first answer was lost → 200 again', async () => {
      const name = unique('unlock-retry');
      const info = await locked(name, 'L-ur');
      expect((await backend('UNLOCK', name, { body: info })).status).toBe(200);
      const again = await backend('UNLOCK', name, { body: info });
      expect(again.status).toBe(200);
      await expectUnlocked(name);
    });

    it('UNLOCK with a wrong ID → 409 with the holder’s LockInfo; the lock stays', async () => {
      const name = unique('unlock-wrong');
      const holder = oddLockInfo('L-keep');
      await locked(name, 'L-keep', holder);
      const r = await backend('UNLOCK', name, { body: lockInfo('L-not-this-one') });
      expect(r.status).toBe(409);
      expect(r.body.equals(Buffer.from(holder))).toBe(true);
      await expectLockedBy(name, 'L-keep', holder);
    });

    it('UNLOCK naming a lock on a state that was never locked → 409 lock_not_held', async () => {
      const name = unique('unlock-never');
      expect((await post(name, SIMPLE)).status).toBe(200);
      const r = await backend('UNLOCK', name, { body: lockInfo('L-never') });
      expect(r.status).toBe(409);
      expect(json(r)).toMatchObject({ code: 'lock_not_held' });
      await expectUnlocked(name);
      expect(await versionNumbers(name)).toEqual([1]);
    });

    it('UNLOCK with an empty chunked body (terraform force-unlock) → 200 and the lock is gone', async () => {
      const name = unique('force-unlock');
      const holder = oddLockInfo('L-stuck');
      await locked(name, 'L-stuck', holder);
      expect((await post(name, SIMPLE, { query: 'ID=L-stuck' })).status).toBe(200);
      const r = await backend('UNLOCK', name, {
        chunks: [],
        headers: { 'Content-Type': 'application/json' },
      });
      expect(r.status).toBe(200);
      await expectUnlocked(name);
      // The state itself is untouched.
      expect(await versionNumbers(name)).toEqual([1]);
      await expectState(name, SIMPLE);
    });
  });

  // ---------------------------------------------------------------- lock_method / unlock_method

  describe('alternative lock methods (?lock) and DELETE', () => {
    it('POST …?lock acquires, with the same answers as LOCK', async () => {
      const name = unique('post-lock');
      const holder = oddLockInfo('L-pl');
      const r = await backend('POST', name, { query: 'lock', body: holder });
      expect(r.status).toBe(200);
      expect(r.text).toBe(holder);
      await expectLockedBy(name, 'L-pl', holder);
      // It did not write a state.
      await expectNoState(name);
      expect(await versionNumbers(name)).toEqual([]);
      const conflict = await backend('POST', name, { query: 'lock', body: lockInfo('L-x') });
      expect(conflict.status).toBe(423);
      expect(conflict.body.equals(Buffer.from(holder))).toBe(true);
    });

    it('PUT …?lock acquires too', async () => {
      const name = unique('put-lock');
      const info = lockInfo('L-pul');
      const r = await backend('PUT', name, { query: 'lock', body: info });
      expect(r.status).toBe(200);
      await expectLockedBy(name, 'L-pul', info);
      await expectNoState(name);
    });

    it('DELETE …?lock releases the lock and leaves the state alone', async () => {
      const name = unique('delete-lock');
      const info = await locked(name, 'L-dl');
      expect((await post(name, SIMPLE, { query: 'ID=L-dl' })).status).toBe(200);
      const r = await backend('DELETE', name, { query: 'lock', body: info });
      expect(r.status).toBe(200);
      await expectUnlocked(name);
      const get = await backend('GET', name);
      expect(get.status).toBe(200);
      expect(get.body.equals(SIMPLE)).toBe(true);
      expect(await versionNumbers(name)).toEqual([1]);
    });

    it('DELETE …?lock with a wrong ID → 409 holder’s LockInfo, nothing released or deleted', async () => {
      const name = unique('delete-lock-wrong');
      const holder = oddLockInfo('L-dlw');
      await locked(name, 'L-dlw', holder);
      expect((await post(name, SIMPLE, { query: 'ID=L-dlw' })).status).toBe(200);
      const r = await backend('DELETE', name, { query: 'lock', body: lockInfo('L-nope') });
      expect(r.status).toBe(409);
      expect(r.body.equals(Buffer.from(holder))).toBe(true);
      await expectLockedBy(name, 'L-dlw', holder);
      await expectState(name, SIMPLE);
    });

    it('DELETE …?lock with an empty body on an unlocked state deletes nothing', async () => {
      const name = unique('delete-lock-empty');
      expect((await post(name, SIMPLE)).status).toBe(200);
      const r = await backend('DELETE', name, { query: 'lock' });
      expect(r.status).toBe(200);
      await expectState(name, SIMPLE);
      expect(await versionNumbers(name)).toEqual([1]);
    });

    it('a plain DELETE deletes the state (soft: versions still listed)', async () => {
      const name = unique('delete-state');
      expect((await post(name, SIMPLE)).status).toBe(200);
      const r = await backend('DELETE', name);
      expect(r.status).toBe(200);
      const get = await backend('GET', name);
      expect(get.status).toBe(404);
      expect(json(get)).toMatchObject({ code: 'state_not_found' });
      expect(await versionNumbers(name)).toEqual([1]);
      const v1 = await api(`/v1/units/${enc(name)}/versions/1`);
      expect(v1.status).toBe(200);
      expect(v1.body.equals(SIMPLE)).toBe(true);
      await expectUnlocked(name);
    });

    it('a plain DELETE of a unit with no state → 404, nothing created', async () => {
      const name = unique('delete-nothing');
      const r = await backend('DELETE', name);
      expect(r.status).toBe(404);
      expect(json(r)).toMatchObject({ statusCode: 404 });
      await expectNoUnit(name);
    });

    it('a plain DELETE with a wrong ?ID while locked → 409 holder’s LockInfo, the state stays', async () => {
      const name = unique('delete-state-wrongid');
      const holder = oddLockInfo('L-ds');
      await locked(name, 'L-ds', holder);
      expect((await post(name, SIMPLE, { query: 'ID=L-ds' })).status).toBe(200);
      const r = await backend('DELETE', name, { query: 'ID=L-other' });
      expect(r.status).toBe(409);
      expect(r.body.equals(Buffer.from(holder))).toBe(true);
      await expectState(name, SIMPLE);
      await expectLockedBy(name, 'L-ds', holder);
    });

    it('an unsupported method → 400 JSON with Allow, nothing stored', async () => {
      const name = unique('patch');
      const r = await backend('PATCH', name, { body: SIMPLE });
      expect(r.status).toBe(400);
      expect(r.headers.allow).toContain('LOCK');
      expect(json(r)).toMatchObject({ code: 'invalid_request' });
      await expectNoUnit(name);
    });
  });

  // ---------------------------------------------------------------- secrets in the log

  describe('server output', () => {
    it('never contains the token (Bearer or Basic) nor state content', async () => {
      // Make sure the token was sent both ways, including on refused requests.
      const name = unique('secrets');
      await send(server, 'POST', bpath(name), {
        body: SIMPLE,
        headers: basic('terraform', server.token),
      });
      await send(server, 'GET', bpath('bn/a%2Fb'), { headers: bearer() });
      await send(server, 'GET', bpath(name), { headers: basic('', server.token) });
      await new Promise((r) => setTimeout(r, 200)); // let the log lines arrive
      const out = server.output() + small.output();
      expect(out.length).toBeGreaterThan(0);
      expect(out).not.toContain(server.token);
      expect(out).not.toContain(Buffer.from(`terraform:${server.token}`).toString('base64'));
      expect(out).not.toContain(Buffer.from(`:${server.token}`).toString('base64'));
      expect(out).not.toContain(SIMPLE_SECRET);
    });
  });
});
