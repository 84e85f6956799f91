import { createHash } from 'node:crypto';
import {
  expectCurrentState,
  onFreshServer,
  RunningServer,
  versionNumbersOf,
} from '../support/server';
import { tfState } from '../support/services';
import { simpleFixture } from '../support/tf-state';

/**
 * The management API (`/v1/units…`, `/v1/locks`, `/docs`) over real sockets against the real
 * `statehouse serve` process. Every refusal is checked for status, JSON body, and — through
 * the API — that nothing was stored or changed.
 */

jest.setTimeout(60_000);

const { bytes: SIMPLE, lineage: SIMPLE_LINEAGE, serial: SIMPLE_SERIAL } = simpleFixture();
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const sha256 = (b: string | Buffer): string => createHash('sha256').update(b).digest('hex');
const md5 = (b: string | Buffer): string => createHash('md5').update(b).digest('base64');
const enc = encodeURIComponent;

// Response bodies are checked by the assertions themselves, not by the type system.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

interface Reply {
  status: number;
  headers: Headers;
  body: Buffer;
  text: string;
  json: () => Json;
}

interface CallOptions {
  /** Sent as JSON (`Content-Type: application/json`). */
  json?: unknown;
  /** Sent as is. */
  raw?: string | Buffer;
  headers?: Record<string, string>;
  /** Leave out the bearer token. */
  anonymous?: boolean;
}

/** Terraform's LockInfo as a client sends it. */
function lockInfo(id?: string, who = 'ci@runner'): Record<string, string> {
  return {
    ...(id === undefined ? {} : { ID: id }),
    Operation: 'OperationTypeApply',
    Info: '',
    Who: who,
    Version: '1.11.4',
    Created: '2026-01-02T03:04:05.123456789Z',
    Path: '',
  };
}

describe('management API (/v1/units, /v1/locks, /docs)', () => {
  let server: RunningServer;
  let counter = 0;

  /** A unit name no other test uses. */
  const unique = (label: string): string => `api/${label}-${++counter}`;

  onFreshServer((started) => (server = started));

  async function call(method: string, path: string, opts: CallOptions = {}): Promise<Reply> {
    const headers: Record<string, string> = {
      ...(opts.anonymous ? {} : server.auth),
      ...(opts.json !== undefined ? { 'Content-Type': 'application/json' } : {}),
      ...opts.headers,
    };
    const body =
      opts.json !== undefined
        ? JSON.stringify(opts.json)
        : opts.raw !== undefined
          ? new Uint8Array(Buffer.from(opts.raw))
          : undefined;
    let r: Response;
    try {
      r = await fetch(`${server.url}${path}`, { method, headers, body });
    } catch (e) {
      // A connection cut before any answer: reported as status 0 so the test says what it got.
      const text = `<no answer: ${String((e as Error).cause ?? e)}>`;
      return {
        status: 0,
        headers: new Headers(),
        body: Buffer.from(text),
        text,
        json: () => ({ error: text }),
      };
    }
    const buf = Buffer.from(await r.arrayBuffer());
    const text = buf.toString('utf8');
    return { status: r.status, headers: r.headers, body: buf, text, json: () => JSON.parse(text) };
  }

  /** Asserts the JSON error format, with `X-Request-Id` equal to `requestId`; returns the body. */
  function expectError(r: Reply, status: number, code: string, message?: RegExp): Json {
    if (r.status !== status) {
      throw new Error(`expected ${status} ${code}, got ${r.status}: ${r.text.slice(0, 600)}`);
    }
    expect(r.headers.get('content-type')).toMatch(/^application\/json/);
    const body = r.json();
    expect(body).toMatchObject({ statusCode: status, code });
    expect(typeof body.message).toBe('string');
    expect(body.message.length).toBeGreaterThan(0);
    if (message) expect(body.message).toMatch(message);
    expect(typeof body.requestId).toBe('string');
    expect(r.headers.get('x-request-id')).toBe(body.requestId);
    return body;
  }

  const unitPath = (name: string): string => `/v1/units/${enc(name)}`;
  const wsq = (workspace?: string, extra = ''): string => {
    const parts = [workspace ? `workspace=${workspace}` : '', extra].filter((p) => p !== '');
    return parts.length ? `?${parts.join('&')}` : '';
  };

  const createUnit = async (name: string): Promise<void> => {
    const r = await call('POST', '/v1/units', { json: { name } });
    expect(r.status).toBe(201);
  };

  async function putState(
    name: string,
    body: string | Buffer,
    opts: { workspace?: string; lockId?: string; headers?: Record<string, string> } = {},
  ): Promise<Reply> {
    const extra = opts.lockId === undefined ? '' : `lock_id=${enc(opts.lockId)}`;
    return call('PUT', `${unitPath(name)}/state${wsq(opts.workspace, extra)}`, {
      raw: body,
      headers: { 'Content-Type': 'application/json', ...opts.headers },
    });
  }

  const versionNumbers = (name: string, workspace?: string): Promise<number[]> =>
    versionNumbersOf(server, name, workspace);

  const expectState = (name: string, bytes: string | Buffer, workspace?: string): Promise<void> =>
    expectCurrentState(server, name, bytes, workspace);

  async function expectNoUnit(name: string): Promise<void> {
    expectError(await call('GET', unitPath(name)), 404, 'unit_not_found');
    expectError(await call('GET', `${unitPath(name)}/versions`), 404, 'unit_not_found');
  }

  async function allUnitNames(): Promise<string[]> {
    const r = await call('GET', '/v1/units?limit=1000');
    expect(r.status).toBe(200);
    return (r.json().items as { name: string }[]).map((u) => u.name);
  }

  async function lock(name: string, info: Record<string, string>, workspace?: string) {
    const r = await call('POST', `${unitPath(name)}/lock${wsq(workspace)}`, { json: info });
    expect(r.status).toBe(200);
    return r.json();
  }

  // ---------------------------------------------------------------- units

  describe('units', () => {
    it('POST /v1/units creates a unit (201) whose default workspace exists at once', async () => {
      const name = unique('create');
      const r = await call('POST', '/v1/units', { json: { name } });
      expect(r.status).toBe(201);
      expect(r.json()).toMatchObject({ name, createdBy: 'bootstrap-admin', deletedAt: null });
      expect(Number.isNaN(Date.parse(r.json().createdAt))).toBe(false);
      const got = await call('GET', unitPath(name));
      expect(got.status).toBe(200);
      expect(got.json()).toMatchObject({
        name,
        workspaces: [
          {
            workspace: 'default',
            currentVersion: null,
            serial: null,
            deleted: false,
            locked: false,
          },
        ],
      });
      expect(await versionNumbers(name)).toEqual([]);
    });

    it('a duplicate name → 409 unit_exists, the unit unchanged', async () => {
      const name = unique('dup');
      const first = await call('POST', '/v1/units', { json: { name } });
      expect(first.status).toBe(201);
      const r = await call('POST', '/v1/units', { json: { name } });
      expectError(r, 409, 'unit_exists', /already exists/);
      const got = await call('GET', unitPath(name));
      expect(got.json()).toMatchObject({ name, createdAt: first.json().createdAt });
    });

    it.each([
      ['an empty segment', 'bad/a//b', /empty segment/],
      ['a leading slash', '/bad/lead', /empty segment/],
      ['a trailing slash', 'bad/trail/', /empty segment/],
      ['a ".." segment', 'bad/a/../b', /"\." or "\.\." segment/],
      ['a "." segment', 'bad/./b', /"\." or "\.\." segment/],
      ['a last segment terraform.tfstate', 'bad/app/terraform.tfstate', /terraform\.tfstate/],
      ['a space', 'bad/a b', /letters, digits/],
      ['a non-ASCII letter', 'bad/été', /letters, digits/],
      ['an empty name', '', /empty/],
      ['more than 256 characters', `bad/${'x'.repeat(260)}`, /longer than 256/],
    ])(
      'a name with %s → 400 invalid_name naming the rule, nothing created',
      async (_l, name, rule) => {
        const before = await allUnitNames();
        const r = await call('POST', '/v1/units', { json: { name } });
        expectError(r, 400, 'invalid_name', rule);
        expect(await allUnitNames()).toEqual(before);
      },
    );

    it.each([
      ['no name field', {}, /name must be a string/],
      ['a name that is not a string', { name: 42 }, /name must be a string/],
      [
        'an extra field',
        { name: 'api/extra-field', color: 'blue' },
        /property color should not exist/,
      ],
      ['a JSON array', [], /name/],
    ])('a body with %s → 400 invalid_request, nothing created', async (_l, json, message) => {
      const before = await allUnitNames();
      expectError(await call('POST', '/v1/units', { json }), 400, 'invalid_request', message);
      expect(await allUnitNames()).toEqual(before);
    });

    it('malformed JSON → 400 JSON error, nothing created', async () => {
      const before = await allUnitNames();
      const r = await call('POST', '/v1/units', {
        raw: '{"name": "api/malformed',
        headers: { 'Content-Type': 'application/json' },
      });
      expectError(r, 400, 'invalid_request', /not valid JSON/);
      expect(await allUnitNames()).toEqual(before);
    });

    it('GET /v1/units pages through a prefix with limit and cursor, in name order', async () => {
      const prefix = `list-${++counter}/`;
      const names = ['u-1', 'u-2', 'u-3', 'u-4', 'u-5'].map((n) => `${prefix}${n}`);
      // Created out of order, with neighbours the prefix must not match.
      for (const n of [names[3], names[0], names[4], names[2], names[1]]) await createUnit(n);
      await createUnit(`${prefix.slice(0, -1)}-other/x`);
      await createUnit(`${prefix.slice(0, -1)}x`);

      const seen: string[] = [];
      const pages: number[] = [];
      let cursor: string | null = null;
      do {
        const q: string = `prefix=${enc(prefix)}&limit=2${cursor ? `&cursor=${enc(cursor)}` : ''}`;
        const r = await call('GET', `/v1/units?${q}`);
        expect(r.status).toBe(200);
        const page = r.json() as { items: { name: string }[]; nextCursor: string | null };
        pages.push(page.items.length);
        seen.push(...page.items.map((u) => u.name));
        cursor = page.nextCursor;
      } while (cursor !== null && pages.length < 10);
      expect(pages).toEqual([2, 2, 1]);
      expect(seen).toEqual(names);

      const whole = await call('GET', `/v1/units?prefix=${enc(prefix)}&limit=5`);
      expect(whole.json()).toMatchObject({ nextCursor: null });
      expect((whole.json().items as { name: string }[]).map((u) => u.name)).toEqual(names);
    });

    it.each([
      ['a cursor this server did not return', 'cursor=not-a-cursor', /cursor/],
      ['limit=0', 'limit=0', /limit/],
      ['limit=1001', 'limit=1001', /limit/],
      ['a prefix with a space', 'prefix=a%20b', /prefix/],
    ])('GET /v1/units with %s → 400 invalid_request', async (_l, query, message) => {
      expectError(await call('GET', `/v1/units?${query}`), 400, 'invalid_request', message);
    });

    it('GET /v1/units/{name} takes the name URL-encoded (team%2Fapp) and shows its workspaces', async () => {
      const name = `team-${++counter}/app`;
      await createUnit(name);
      const r = await call('GET', `/v1/units/${name.replace('/', '%2F')}`);
      expect(r.status).toBe(200);
      expect(r.json()).toMatchObject({ name, workspaces: [{ workspace: 'default' }] });
      const lower = await call('GET', `/v1/units/${name.replace('/', '%2f')}`);
      expect(lower.status).toBe(200);
      expect(lower.json()).toMatchObject({ name });
    });

    it('GET of a unit that does not exist → 404 unit_not_found', async () => {
      await expectNoUnit(unique('missing'));
    });
  });

  // ---------------------------------------------------------------- state and versions

  describe('state and versions', () => {
    it('PUT /state stores the raw body; GET /state returns it byte for byte with X-Statehouse-Version', async () => {
      const name = unique('put');
      const w = await putState(name, SIMPLE);
      expect(w.status).toBe(200);
      expect(w.json()).toMatchObject({
        created: true,
        version: {
          version: 1,
          serial: SIMPLE_SERIAL,
          lineage: SIMPLE_LINEAGE,
          terraformVersion: '1.11.4',
          encrypted: false,
          sha256: sha256(SIMPLE),
          size: SIMPLE.length,
          createdBy: 'bootstrap-admin',
          door: 'api',
          restoredFrom: null,
        },
      });
      const r = await call('GET', `${unitPath(name)}/state`);
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toMatch(/^application\/json/);
      expect(r.headers.get('x-statehouse-version')).toBe('1');
      expect(r.headers.get('content-length')).toBe(String(SIMPLE.length));
      expect(r.headers.get('content-md5')).toBe(md5(SIMPLE));
      expect(r.body.equals(SIMPLE)).toBe(true);
      // The unit appeared on first use.
      expect((await call('GET', unitPath(name))).json()).toMatchObject({
        workspaces: [
          { workspace: 'default', currentVersion: 1, serial: SIMPLE_SERIAL, size: SIMPLE.length },
        ],
      });
    });

    it('GET /state of a unit without state → 404 state_not_found', async () => {
      const name = unique('nostate');
      await createUnit(name);
      expectError(await call('GET', `${unitPath(name)}/state`), 404, 'state_not_found');
    });

    it('a byte-identical PUT creates no version', async () => {
      const name = unique('identical');
      expect((await putState(name, SIMPLE)).status).toBe(200);
      const again = await putState(name, SIMPLE);
      expect(again.status).toBe(200);
      expect(again.json()).toMatchObject({ created: false, version: { version: 1 } });
      expect(await versionNumbers(name)).toEqual([1]);
    });

    it('PUT of a body that is not a state → 400 invalid_state, nothing stored', async () => {
      const name = unique('invalid');
      expectError(await putState(name, '{"not":"a state"}'), 400, 'invalid_state');
      expectError(await putState(name, 'not json at all'), 400, 'invalid_state');
      await expectNoUnit(name);
    });

    it('PUT with a lower serial or the same serial and other bytes → 409 serial_conflict', async () => {
      const name = unique('serial');
      expect((await putState(name, SIMPLE)).status).toBe(200);
      expectError(
        await putState(name, tfState(SIMPLE_SERIAL - 1, SIMPLE_LINEAGE)),
        409,
        'serial_conflict',
      );
      expectError(
        await putState(name, tfState(SIMPLE_SERIAL, SIMPLE_LINEAGE)),
        409,
        'serial_conflict',
      );
      expect(await versionNumbers(name)).toEqual([1]);
      await expectState(name, SIMPLE);
    });

    it('PUT with a wrong Content-MD5 → 400 checksum_mismatch, nothing stored', async () => {
      const name = unique('md5');
      const r = await putState(name, SIMPLE, { headers: { 'Content-MD5': md5('other') } });
      expectError(r, 400, 'checksum_mismatch');
      await expectNoUnit(name);
    });

    it('PUT while locked needs the holder’s lock_id', async () => {
      const name = unique('put-locked');
      const info = lockInfo('L-put');
      await lock(name, info);

      const noId = expectError(await putState(name, SIMPLE), 409, 'locked');
      expect(noId).toMatchObject({ lock: info, lockHolder: 'bootstrap-admin' });
      const wrong = expectError(
        await putState(name, SIMPLE, { lockId: 'L-wrong' }),
        409,
        'lock_mismatch',
      );
      expect(wrong).toMatchObject({ lock: info, lockHolder: 'bootstrap-admin' });
      expect(await versionNumbers(name)).toEqual([]);

      const ok = await putState(name, SIMPLE, { lockId: 'L-put' });
      expect(ok.status).toBe(200);
      expect(ok.json()).toMatchObject({ created: true, version: { version: 1 } });
      await expectState(name, SIMPLE);
    });

    it('PUT naming a lock that is not held → 409 lock_not_held, nothing stored', async () => {
      const name = unique('put-notheld');
      expectError(await putState(name, SIMPLE, { lockId: 'L-ghost' }), 409, 'lock_not_held');
      await expectNoUnit(name);
    });

    it('/versions lists newest first and pages with a cursor; /versions/{n} is byte-exact', async () => {
      const name = unique('versions');
      const bodies = [1, 2, 3, 4, 5].map((serial) => tfState(serial, 'lineage-v', { n: serial }));
      for (const b of bodies) expect((await putState(name, b)).status).toBe(200);

      expect(await versionNumbers(name)).toEqual([5, 4, 3, 2, 1]);
      const all = (await call('GET', `${unitPath(name)}/versions`)).json();
      expect(all.nextCursor).toBeNull();
      expect(all.items[0]).toMatchObject({ version: 5, serial: 5, sha256: sha256(bodies[4]) });

      const pages: number[][] = [];
      let cursor: string | null = null;
      do {
        const q: string = `limit=2${cursor ? `&cursor=${enc(cursor)}` : ''}`;
        const r = await call('GET', `${unitPath(name)}/versions?${q}`);
        expect(r.status).toBe(200);
        pages.push((r.json().items as { version: number }[]).map((v) => v.version));
        cursor = r.json().nextCursor as string | null;
      } while (cursor !== null && pages.length < 10);
      expect(pages).toEqual([[5, 4], [3, 2], [1]]);

      for (const [i, b] of bodies.entries()) {
        const r = await call('GET', `${unitPath(name)}/versions/${i + 1}`);
        expect(r.status).toBe(200);
        expect(r.headers.get('x-statehouse-version')).toBe(String(i + 1));
        expect(r.text).toBe(b);
      }
      expectError(await call('GET', `${unitPath(name)}/versions/99`), 404, 'version_not_found');
      expectError(await call('GET', `${unitPath(name)}/versions/abc`), 400, 'invalid_request');
      expectError(
        await call('GET', `${unitPath(name)}/versions?cursor=bogus`),
        400,
        'invalid_request',
        /cursor/,
      );
    });

    it('/versions/{n}/restore makes a new version with restoredFrom and the same bytes', async () => {
      const name = unique('restore');
      const v1 = tfState(1, 'lineage-r', { v: 1 });
      expect((await putState(name, v1)).status).toBe(200);
      expect((await putState(name, tfState(2, 'lineage-r', { v: 2 }))).status).toBe(200);
      expect((await putState(name, tfState(3, 'lineage-r', { v: 3 }))).status).toBe(200);

      const r = await call('POST', `${unitPath(name)}/versions/1/restore`);
      expect(r.status).toBe(200);
      expect(r.json()).toMatchObject({
        created: true,
        version: {
          version: 4,
          restoredFrom: 1,
          serial: 1,
          sha256: sha256(v1),
          size: Buffer.byteLength(v1),
        },
      });
      await expectState(name, v1);
      const head = await call('GET', `${unitPath(name)}/state`);
      expect(head.headers.get('x-statehouse-version')).toBe('4');
      expect(await versionNumbers(name)).toEqual([4, 3, 2, 1]);

      // Restoring the current content again creates nothing.
      const again = await call('POST', `${unitPath(name)}/versions/1/restore`);
      expect(again.status).toBe(200);
      expect(again.json()).toMatchObject({ created: false, version: { version: 4 } });

      // Terraform's next apply (serial + 1 of the restored version) is accepted.
      const next = tfState(2, 'lineage-r', { v: 'after-restore' });
      const w = await putState(name, next);
      expect(w.status).toBe(200);
      expect(w.json()).toMatchObject({ created: true, version: { version: 5, serial: 2 } });

      expectError(
        await call('POST', `${unitPath(name)}/versions/42/restore`),
        404,
        'version_not_found',
      );
      expect(await versionNumbers(name)).toEqual([5, 4, 3, 2, 1]);
    });

    it('restore with a lock_id that is not the held lock → 409 lock_mismatch, nothing stored', async () => {
      const name = unique('restore-locked');
      const v1 = tfState(1, 'lineage-rl');
      const v2 = tfState(2, 'lineage-rl');
      expect((await putState(name, v1)).status).toBe(200);
      expect((await putState(name, v2)).status).toBe(200);
      const info = lockInfo('L-restore');
      await lock(name, info);
      const r = await call('POST', `${unitPath(name)}/versions/1/restore?lock_id=L-other`);
      const body = expectError(r, 409, 'lock_mismatch');
      expect(body).toMatchObject({ lock: info, lockHolder: 'bootstrap-admin' });
      expect(await versionNumbers(name)).toEqual([2, 1]);
      await expectState(name, v2);
      const ok = await call('POST', `${unitPath(name)}/versions/1/restore?lock_id=L-restore`);
      expect(ok.status).toBe(200);
      expect(ok.json()).toMatchObject({ created: true, version: { version: 3, restoredFrom: 1 } });
      await expectState(name, v1);
    });

    it('/outputs gives the outputs of the current state (simple.tfstate)', async () => {
      const name = unique('outputs');
      expect((await putState(name, SIMPLE)).status).toBe(200);
      const r = await call('GET', `${unitPath(name)}/outputs`);
      expect(r.status).toBe(200);
      const fixture = JSON.parse(SIMPLE.toString()) as { outputs: Record<string, unknown> };
      expect(r.json()).toEqual({ version: 1, serial: SIMPLE_SERIAL, outputs: fixture.outputs });
      expect(r.json().outputs.vpc_cidr).toEqual({ value: '10.0.0.0/16', type: 'string' });
      expect(r.json().outputs.subnets.value).toEqual({ a: '10.0.1.0/24', b: '10.0.2.0/24' });
    });

    it('/workspaces lists every workspace with its current version; ?workspace selects one', async () => {
      const name = unique('workspaces');
      const dev = tfState(7, 'lineage-dev');
      expect((await putState(name, SIMPLE)).status).toBe(200);
      expect((await putState(name, dev, { workspace: 'dev' })).status).toBe(200);
      const r = await call('GET', `${unitPath(name)}/workspaces`);
      expect(r.status).toBe(200);
      expect(r.json()).toEqual([
        expect.objectContaining({
          workspace: 'default',
          currentVersion: 1,
          serial: SIMPLE_SERIAL,
          size: SIMPLE.length,
          deleted: false,
          locked: false,
        }),
        expect.objectContaining({
          workspace: 'dev',
          currentVersion: 1,
          serial: 7,
          size: Buffer.byteLength(dev),
          deleted: false,
          locked: false,
        }),
      ]);
      await expectState(name, dev, 'dev');
      await expectState(name, SIMPLE);
      expect(await versionNumbers(name, 'dev')).toEqual([1]);
    });

    it('DELETE /state deletes the state softly: 404 afterwards, versions still listed', async () => {
      const name = unique('delete-state');
      expect((await putState(name, SIMPLE)).status).toBe(200);
      const r = await call('DELETE', `${unitPath(name)}/state`);
      expect(r.status).toBe(204);
      expectError(await call('GET', `${unitPath(name)}/state`), 404, 'state_not_found');
      expect(await versionNumbers(name)).toEqual([1]);
      const v1 = await call('GET', `${unitPath(name)}/versions/1`);
      expect(v1.body.equals(SIMPLE)).toBe(true);
      // The unit itself is still there.
      expect((await call('GET', unitPath(name))).status).toBe(200);
    });
  });

  // ---------------------------------------------------------------- locks

  describe('locks', () => {
    it('POST /lock without an ID generates one; GET /lock shows the lock', async () => {
      const name = unique('lock-gen');
      const info = lockInfo(undefined, 'dev@laptop');
      const r = await call('POST', `${unitPath(name)}/lock`, { json: info });
      expect(r.status).toBe(200);
      const view = r.json();
      expect(view.id).toMatch(UUID);
      expect(view).toMatchObject({
        unit: name,
        workspace: 'default',
        principal: 'bootstrap-admin',
        info: { ...info, ID: view.id },
      });
      expect(view.ageSeconds).toBeGreaterThanOrEqual(0);
      const got = await call('GET', `${unitPath(name)}/lock`);
      expect(got.status).toBe(200);
      expect(got.json()).toMatchObject({ id: view.id, info: { ...info, ID: view.id } });
    });

    it('POST /lock with an empty body generates a LockInfo with an ID', async () => {
      const name = unique('lock-empty');
      const r = await call('POST', `${unitPath(name)}/lock`);
      expect(r.status).toBe(200);
      expect(r.json().id).toMatch(UUID);
      expect(r.json().info).toEqual({ ID: r.json().id });
    });

    it('POST /lock again by the same principal with the same ID → 200; another ID → 409 with the holder', async () => {
      const name = unique('lock-retry');
      const info = lockInfo('L-api');
      const first = await lock(name, info);
      const again = await call('POST', `${unitPath(name)}/lock`, { json: info });
      expect(again.status).toBe(200);
      expect(again.json()).toMatchObject({ id: 'L-api', createdAt: first.createdAt });

      const other = await call('POST', `${unitPath(name)}/lock`, { json: lockInfo('L-other') });
      const body = expectError(other, 409, 'lock_conflict');
      expect(body).toMatchObject({ lock: info, lockHolder: 'bootstrap-admin' });
      expect((await call('GET', `${unitPath(name)}/lock`)).json()).toMatchObject({ id: 'L-api' });
    });

    it('POST /lock with a body that is not a LockInfo → 400, no lock', async () => {
      const name = unique('lock-bad');
      await createUnit(name);
      for (const raw of ['not json', '[1]', '{"ID": 5}']) {
        const r = await call('POST', `${unitPath(name)}/lock`, {
          raw,
          headers: { 'Content-Type': 'application/json' },
        });
        expectError(r, 400, 'invalid_request');
      }
      expectError(await call('GET', `${unitPath(name)}/lock`), 404, 'lock_not_found');
    });

    it('POST /lock with a LockInfo over 64 KiB → 413 too_large, no lock', async () => {
      const name = unique('lock-huge');
      await createUnit(name);
      const r = await call('POST', `${unitPath(name)}/lock`, {
        json: lockInfo('L-huge', 'x'.repeat(70 * 1024)),
      });
      expectError(r, 413, 'too_large');
      expectError(await call('GET', `${unitPath(name)}/lock`), 404, 'lock_not_found');
    });

    it('DELETE /lock?id= releases; a retried release answers 204 again', async () => {
      const name = unique('release');
      await lock(name, lockInfo('L-rel'));
      const r = await call('DELETE', `${unitPath(name)}/lock?id=L-rel`);
      expect(r.status).toBe(204);
      expect(r.body.length).toBe(0);
      expectError(await call('GET', `${unitPath(name)}/lock`), 404, 'lock_not_found');
      expect((await call('DELETE', `${unitPath(name)}/lock?id=L-rel`)).status).toBe(204);
      // Free again for another ID.
      expect(
        (await call('POST', `${unitPath(name)}/lock`, { json: lockInfo('L-next') })).status,
      ).toBe(200);
    });

    it('DELETE /lock with a wrong id → 409 lock_mismatch with the holder; without id → 400; the lock stays', async () => {
      const name = unique('release-wrong');
      const info = lockInfo('L-keep');
      await lock(name, info);
      const wrong = expectError(
        await call('DELETE', `${unitPath(name)}/lock?id=L-no`),
        409,
        'lock_mismatch',
      );
      expect(wrong).toMatchObject({ lock: info, lockHolder: 'bootstrap-admin' });
      expectError(await call('DELETE', `${unitPath(name)}/lock`), 400, 'invalid_request', /id/);
      expect((await call('GET', `${unitPath(name)}/lock`)).json()).toMatchObject({ id: 'L-keep' });
    });

    it('DELETE /lock naming a lock that was never held → 409 lock_not_held', async () => {
      const name = unique('release-never');
      await createUnit(name);
      expectError(await call('DELETE', `${unitPath(name)}/lock?id=L-never`), 409, 'lock_not_held');
    });

    it('POST /force-unlock removes whatever lock is held, and says when there was none', async () => {
      const name = unique('force');
      const info = lockInfo('L-force');
      await lock(name, info);
      const r = await call('POST', `${unitPath(name)}/force-unlock`);
      expect(r.status).toBe(200);
      expect(r.json()).toMatchObject({
        released: true,
        lock: { id: 'L-force', info, principal: 'bootstrap-admin', unit: name },
      });
      expectError(await call('GET', `${unitPath(name)}/lock`), 404, 'lock_not_found');
      const again = await call('POST', `${unitPath(name)}/force-unlock`);
      expect(again.status).toBe(200);
      expect(again.json()).toEqual({ released: false, lock: null });
    });

    it('GET /v1/locks lists held locks with ageSeconds', async () => {
      const a = unique('listed-a');
      const b = unique('listed-b');
      await lock(a, lockInfo('L-a'));
      await lock(b, lockInfo('L-b'), 'dev');
      const r = await call('GET', '/v1/locks');
      expect(r.status).toBe(200);
      const locks = r.json() as {
        unit: string;
        workspace: string;
        id: string;
        ageSeconds: number;
      }[];
      const mine = locks.filter((l) => l.unit === a || l.unit === b);
      expect(mine).toEqual(
        expect.arrayContaining([
          expect.objectContaining({
            unit: a,
            workspace: 'default',
            id: 'L-a',
            principal: 'bootstrap-admin',
          }),
          expect.objectContaining({
            unit: b,
            workspace: 'dev',
            id: 'L-b',
            principal: 'bootstrap-admin',
          }),
        ]),
      );
      expect(mine).toHaveLength(2);
      for (const l of mine) {
        expect(Number.isInteger(l.ageSeconds)).toBe(true);
        expect(l.ageSeconds).toBeGreaterThanOrEqual(0);
      }
      expect((await call('DELETE', `${unitPath(a)}/lock?id=L-a`)).status).toBe(204);
      const after = (await call('GET', '/v1/locks')).json() as { unit: string }[];
      expect(after.some((l) => l.unit === a)).toBe(false);
      expect(after.some((l) => l.unit === b)).toBe(true);
    });

    it('DELETE /v1/units/{name} while locked → 409 with the holder’s LockInfo and lockHolder', async () => {
      const name = unique('delete-locked');
      const info = lockInfo('L-del', 'holder@host');
      expect((await putState(name, SIMPLE)).status).toBe(200);
      await lock(name, info, 'dev');
      const body = expectError(await call('DELETE', unitPath(name)), 409, 'locked', /locked/);
      expect(body.lock).toEqual(info);
      expect(body.lockHolder).toBe('bootstrap-admin');
      expect((await call('GET', unitPath(name))).status).toBe(200);
      await expectState(name, SIMPLE);
    });
  });

  // ---------------------------------------------------------------- delete, undelete, purge

  describe('delete, undelete, purge', () => {
    it('DELETE of a unit is soft: GET 404, versions still listed, the name stays taken', async () => {
      const name = unique('soft');
      expect((await putState(name, SIMPLE)).status).toBe(200);
      const r = await call('DELETE', unitPath(name));
      expect(r.status).toBe(204);
      expectError(await call('GET', unitPath(name)), 404, 'unit_not_found');
      expectError(await call('GET', `${unitPath(name)}/state`), 404, 'state_not_found');
      expect(await versionNumbers(name)).toEqual([1]);
      const v1 = await call('GET', `${unitPath(name)}/versions/1`);
      expect(v1.status).toBe(200);
      expect(v1.body.equals(SIMPLE)).toBe(true);
      expect(await allUnitNames()).not.toContain(name);
      expectError(await call('POST', '/v1/units', { json: { name } }), 409, 'unit_deleted');
      expectError(await call('DELETE', unitPath(name)), 404, 'unit_not_found');
    });

    it('POST /undelete brings the unit and its state back', async () => {
      const name = unique('undelete');
      expect((await putState(name, SIMPLE)).status).toBe(200);
      expect((await call('DELETE', unitPath(name))).status).toBe(204);
      const r = await call('POST', `${unitPath(name)}/undelete`);
      expect(r.status).toBe(204);
      expect((await call('GET', unitPath(name))).status).toBe(200);
      await expectState(name, SIMPLE);
      expect(await versionNumbers(name)).toEqual([1]);
      expectError(await call('POST', `${unitPath(name)}/undelete`), 409, 'not_deleted');
    });

    it('undelete ?workspace= brings one deleted workspace state back', async () => {
      const name = unique('undelete-ws');
      expect((await putState(name, SIMPLE)).status).toBe(200);
      expect((await call('DELETE', `${unitPath(name)}/state`)).status).toBe(204);
      expectError(await call('GET', `${unitPath(name)}/state`), 404, 'state_not_found');
      const r = await call('POST', `${unitPath(name)}/undelete?workspace=default`);
      expect(r.status).toBe(204);
      await expectState(name, SIMPLE);
      expect(await versionNumbers(name)).toEqual([1]);
      expectError(
        await call('POST', `${unitPath(name)}/undelete?workspace=default`),
        409,
        'not_deleted',
      );
    });

    it('purge ?workspace= removes one deleted workspace state and its versions; the unit stays', async () => {
      const name = unique('purge-ws');
      expect((await putState(name, SIMPLE)).status).toBe(200);
      expect((await putState(name, tfState(1, 'lineage-dev'), { workspace: 'dev' })).status).toBe(
        200,
      );
      expectError(await call('POST', `${unitPath(name)}/purge?workspace=dev`), 409, 'not_deleted');
      expect(await versionNumbers(name, 'dev')).toEqual([1]);
      expect((await call('DELETE', `${unitPath(name)}/state?workspace=dev`)).status).toBe(204);
      expect((await call('POST', `${unitPath(name)}/purge?workspace=dev`)).status).toBe(204);
      expectError(
        await call('GET', `${unitPath(name)}/versions?workspace=dev`),
        404,
        'state_not_found',
      );
      await expectState(name, SIMPLE);
      expect(await versionNumbers(name)).toEqual([1]);
      const ws = (await call('GET', `${unitPath(name)}/workspaces`)).json() as {
        workspace: string;
      }[];
      expect(ws.map((w) => w.workspace)).toEqual(['default']);
    });

    it('purge of a unit that is not deleted → 409 not_deleted, nothing removed', async () => {
      const name = unique('purge-live');
      expect((await putState(name, SIMPLE)).status).toBe(200);
      expectError(await call('POST', `${unitPath(name)}/purge`), 409, 'not_deleted');
      expect(await versionNumbers(name)).toEqual([1]);
      await expectState(name, SIMPLE);
    });

    it('delete + purge removes the versions for good; the name can be used again', async () => {
      const name = unique('purge');
      expect((await putState(name, SIMPLE)).status).toBe(200);
      expect((await putState(name, tfState(SIMPLE_SERIAL + 1, SIMPLE_LINEAGE))).status).toBe(200);
      expect((await call('DELETE', unitPath(name))).status).toBe(204);
      const r = await call('POST', `${unitPath(name)}/purge`);
      expect(r.status).toBe(204);
      await expectNoUnit(name);
      expectError(await call('GET', `${unitPath(name)}/versions/1`), 404, 'unit_not_found');
      expectError(await call('POST', `${unitPath(name)}/undelete`), 404, 'unit_not_found');
      await createUnit(name);
      expect(await versionNumbers(name)).toEqual([]);
    });
  });

  // ---------------------------------------------------------------- error format, docs

  describe('error format', () => {
    it('errors carry statusCode, code, message, requestId, and X-Request-Id equals requestId', async () => {
      const checks: [Reply, number, string][] = [
        [await call('GET', unitPath(unique('err-404'))), 404, 'unit_not_found'],
        [await call('POST', '/v1/units', { json: { name: 'a//b' } }), 400, 'invalid_name'],
        [await call('GET', '/v1/units', { anonymous: true }), 401, 'unauthenticated'],
        [
          await call('GET', '/v1/units', { headers: { Authorization: 'Bearer nope-nope-nope' } }),
          401,
          'unauthenticated',
        ],
      ];
      const ids = new Set<string>();
      for (const [r, status, code] of checks) ids.add(expectError(r, status, code).requestId);
      expect(ids.size).toBe(checks.length);
    });

    it('a client’s X-Request-Id is kept and returned in the error body', async () => {
      const r = await call('GET', unitPath(unique('err-rid')), {
        headers: { 'X-Request-Id': 'ci-run-42.step_3' },
      });
      const body = expectError(r, 404, 'unit_not_found');
      expect(body.requestId).toBe('ci-run-42.step_3');
    });

    it('an unknown route → 400 unknown_route naming it (never 404: "no state" to Terraform)', async () => {
      const r = await call('GET', '/v1/no-such-route');
      expectError(r, 400, 'unknown_route', /GET \/v1\/no-such-route/);
      const nested = await call('POST', `${unitPath(unique('unknown'))}/nothing-here`);
      expectError(nested, 400, 'unknown_route', /nothing-here/);
    });
  });

  describe('docs', () => {
    it('GET /docs serves the Swagger UI', async () => {
      const r = await call('GET', '/docs', { anonymous: true });
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toMatch(/^text\/html/);
      expect(r.text).toMatch(/swagger/i);
    });

    it('GET /docs/openapi.json is the OpenAPI document with /v1/units', async () => {
      const r = await call('GET', '/docs/openapi.json', { anonymous: true });
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toMatch(/^application\/json/);
      const doc = r.json();
      expect(doc.openapi).toMatch(/^3\./);
      expect(doc.paths['/v1/units']).toBeDefined();
      expect(Object.keys(doc.paths['/v1/units'])).toEqual(expect.arrayContaining(['get', 'post']));
      expect(doc.paths['/v1/units/{name}/lock']).toBeDefined();
      expect(doc.paths['/v1/locks']).toBeDefined();
    });
  });
});
