/**
 * The RBAC management API (`/v1/rbac/…`) against the real `statehouse serve` process: status
 * before and after init, init only by bootstrap-admin (once), CRUD of permissions, roles and
 * assignments with their validation errors (400s that name the problem, 404s, 409s), 403
 * without `rbac.manage`, `POST /v1/rbac/test` (allow/deny and the deciding rule), `GET
 * /v1/rbac/me`, and a revoked grant failing on the very next request.
 *
 * Principals are service principals with API tokens created by bootstrap-admin.
 */
import { randomUUID } from 'node:crypto';
import { freshServerEnv } from '../support/database';
import { RunningServer, spawnServer } from '../support/server';
import { tfStateText } from '../support/tf-state';

jest.setTimeout(120_000);

interface Answer {
  status: number;
  text: string;
  json: Record<string, unknown>;
  contentType: string | null;
}

let server: RunningServer;

async function call(token: string, method: string, path: string, body?: unknown): Promise<Answer> {
  const r = await fetch(`${server.url}${path}`, {
    method,
    headers: {
      Authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
    },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await r.text();
  let json: Record<string, unknown> = {};
  try {
    json = text === '' ? {} : (JSON.parse(text) as Record<string, unknown>);
  } catch {
    json = { unparsed: text };
  }
  return { status: r.status, text, json, contentType: r.headers.get('content-type') };
}

/** The JSON error format with this status and code; returns the message. */
function expectError(a: Answer, status: number, code?: string, message?: RegExp): string {
  expect({ status: a.status, body: a.text.slice(0, 300) }).toMatchObject({ status });
  expect(a.contentType).toMatch(/^application\/json/);
  expect(a.json).toMatchObject({ statusCode: status });
  if (code) expect(a.json.code).toBe(code);
  const m = String(a.json.message);
  if (message) expect(m).toMatch(message);
  return m;
}

const tfState = (serial: number): string =>
  tfStateText({ serial, lineage: 'rbac-api', compact: true });

const tokens: Record<string, string> = {};

async function serviceToken(name: string): Promise<string> {
  const r = await call(server.token, 'POST', '/v1/auth/tokens', {
    name: `rbac-api ${name}`,
    subject: `svc:${name}`,
  });
  expect(r.status).toBe(201);
  tokens[name] = r.json.token as string;
  return tokens[name];
}

describe('RBAC management API', () => {
  let cleanup: () => Promise<void>;
  let admin: string; // svc:admin, assigned the admin role by init
  let dev: string; // svc:dev, granted and revoked below
  let outsider: string; // svc:outsider, never granted anything

  beforeAll(async () => {
    const env = await freshServerEnv();
    cleanup = env.cleanup;
    server = await spawnServer(env.env);
    admin = await serviceToken('admin');
    dev = await serviceToken('dev');
    outsider = await serviceToken('outsider');
  });
  afterAll(async () => {
    await server?.stop();
    await cleanup?.();
  });

  describe('before init', () => {
    it('status says not initialised, to anyone authenticated; the start logged a warning', async () => {
      const s = await call(outsider, 'GET', '/v1/rbac/status');
      expect(s.status).toBe(200);
      expect(s.json).toMatchObject({ initialised: false });
      expect(String(s.json.mode)).toMatch(/not initialised/);
      expect(server.output()).toMatch(/RBAC is not initialised/);
      expect((await fetch(`${server.url}/v1/rbac/status`)).status).toBe(401);
    });

    it('authenticated principals may use units, but not manage RBAC', async () => {
      const put = await fetch(`${server.url}/v1/backend/pre/init`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${dev}`, 'Content-Type': 'application/json' },
        body: tfState(1),
      });
      expect(put.status).toBe(200);
      expectError(await call(dev, 'GET', '/v1/rbac/permissions'), 403, 'forbidden', /rbac\.manage/);
      expectError(
        await call(dev, 'POST', '/v1/rbac/permissions', {
          name: 'early',
          rules: [{ effect: 'allow', actions: ['unit.read'], resources: ['**'] }],
        }),
        403,
        'forbidden',
      );
      expect((await call(server.token, 'GET', '/v1/rbac/permissions')).json).toEqual([]);
    });

    it('me answers before init too', async () => {
      const me = await call(dev, 'GET', '/v1/rbac/me');
      expect(me.status).toBe(200);
      expect(me.json).toMatchObject({
        subject: 'svc:dev',
        initialised: false,
        breakGlass: false,
        roles: [],
        rules: [],
      });
    });
  });

  describe('init', () => {
    it('is refused to anyone but bootstrap-admin, and changes nothing', async () => {
      for (const t of [dev, outsider]) {
        expectError(
          await call(t, 'POST', '/v1/rbac/init', { admin: { subject: 'svc:dev' } }),
          403,
          'forbidden',
          /bootstrap-admin only/,
        );
      }
      expect((await call(dev, 'GET', '/v1/rbac/status')).json).toMatchObject({
        initialised: false,
      });
    });

    it.each([
      ['no admin at all', {}],
      ['an admin naming nobody', { admin: {} }],
      [
        'an admin with both a subject and an email',
        { admin: { subject: 'svc:a', email: 'a@x.io' } },
      ],
      ['an admin email that is not one', { admin: { email: 'not-an-email' } }],
      ['an unknown field', { admin: { subject: 'svc:admin' }, extra: true }],
      ['a subject that is not a string', { admin: { subject: 42 } }],
    ])('refuses a malformed body (%s) with a 400, and stays uninitialised', async (_l, body) => {
      expectError(await call(server.token, 'POST', '/v1/rbac/init', body), 400, 'invalid_request');
      expect((await call(dev, 'GET', '/v1/rbac/status')).json).toMatchObject({
        initialised: false,
      });
    });

    it('by bootstrap-admin: 201, roles admin and reader, admin assigned; a second init is a 409', async () => {
      const r = await call(server.token, 'POST', '/v1/rbac/init', {
        admin: { subject: 'svc:admin' },
      });
      expect(r.status).toBe(201);
      expect(r.json).toMatchObject({
        initialised: true,
        admin: { role_id: expect.any(String), subject_type: 'subject', subject_value: 'svc:admin' },
      });
      const status = await call(outsider, 'GET', '/v1/rbac/status');
      expect(status.json).toMatchObject({ initialised: true });

      const roles = await call(admin, 'GET', '/v1/rbac/roles');
      expect(roles.status).toBe(200);
      expect(
        (roles.json as unknown as { name: string; permissions: string[] }[]).map((x) => [
          x.name,
          x.permissions,
        ]),
      ).toEqual([
        ['admin', ['admin-all']],
        ['reader', ['reader-all']],
      ]);

      expectError(
        await call(server.token, 'POST', '/v1/rbac/init', { admin: { subject: 'svc:dev' } }),
        409,
        'conflict',
        /already initialised/,
      );
      const assignments = await call(admin, 'GET', '/v1/rbac/assignments');
      expect(
        (assignments.json as unknown as { subject_value: string }[]).map((a) => a.subject_value),
      ).toEqual(['svc:admin']);
    });

    it('after init, a principal with no assignment is refused units (403, not 500)', async () => {
      const r = await fetch(`${server.url}/v1/backend/pre/init`, {
        headers: { Authorization: `Bearer ${dev}` },
      });
      expect(r.status).toBe(403);
      expect(await r.json()).toMatchObject({
        code: 'forbidden',
        message: expect.stringMatching(/svc:dev may not unit\.read on pre\/init/),
      });
    });
  });

  describe('permissions', () => {
    const rules = [{ effect: 'allow', actions: ['unit.read'], resources: ['team/**'] }];

    it('create, list, update (description, rules), delete', async () => {
      const c = await call(admin, 'POST', '/v1/rbac/permissions', {
        name: 'team-read',
        description: 'read the team',
        rules,
      });
      expect(c.status).toBe(201);
      expect(c.json).toMatchObject({
        name: 'team-read',
        description: 'read the team',
        rules: [
          { effect: 'allow', actions: ['unit.read'], resources: ['team/**'], workspaces: null },
        ],
      });
      const list = await call(admin, 'GET', '/v1/rbac/permissions');
      expect((list.json as unknown as { name: string }[]).map((p) => p.name)).toEqual(
        expect.arrayContaining(['admin-all', 'reader-all', 'team-read']),
      );
      const u = await call(admin, 'PUT', '/v1/rbac/permissions/team-read', {
        description: 'read and write the team',
        rules: [
          { effect: 'allow', actions: ['unit.read', 'unit.write'], resources: ['team/**'] },
          {
            effect: 'deny',
            actions: ['unit.write'],
            resources: ['team/frozen'],
            workspaces: ['prod'],
          },
        ],
      });
      expect(u.status).toBe(200);
      expect(u.json).toMatchObject({
        description: 'read and write the team',
        rules: [
          { effect: 'allow', actions: ['unit.read', 'unit.write'] },
          { effect: 'deny', resources: ['team/frozen'], workspaces: ['prod'] },
        ],
      });
      const d = await call(admin, 'DELETE', '/v1/rbac/permissions/team-read');
      expect(d.status).toBe(204);
      expectError(await call(admin, 'DELETE', '/v1/rbac/permissions/team-read'), 404, 'not_found');
      expectError(
        await call(admin, 'PUT', '/v1/rbac/permissions/team-read', { description: 'x' }),
        404,
        'not_found',
      );
    });

    it.each([
      [
        'an unknown action',
        [{ effect: 'allow', actions: ['unit.fly'], resources: ['**'] }],
        /unknown action "unit\.fly"/,
      ],
      [
        '"**" inside a segment',
        [{ effect: 'allow', actions: ['unit.read'], resources: ['team/**x'] }],
        /"\*\*" must be a whole segment/,
      ],
      [
        'an empty segment',
        [{ effect: 'allow', actions: ['unit.read'], resources: ['team//x'] }],
        /empty segment/,
      ],
      [
        'a global action on a unit pattern',
        [{ effect: 'allow', actions: ['audit.read'], resources: ['team/**'] }],
        /audit\.read take the resource "\*"/,
      ],
      ['no rules', [], /at least one rule/],
      ['no actions', [{ effect: 'allow', actions: [], resources: ['**'] }], /at least one action/],
      [
        'no resources',
        [{ effect: 'allow', actions: ['unit.read'], resources: [] }],
        /at least one pattern/,
      ],
      [
        'a bad effect',
        [{ effect: 'perhaps', actions: ['unit.read'], resources: ['**'] }],
        /effect/,
      ],
      [
        'a bad workspace',
        [{ effect: 'allow', actions: ['unit.read'], resources: ['**'], workspaces: ['a/b'] }],
        /workspace pattern "a\/b"/,
      ],
      ['rules that are not a list', 'everything', /rules/],
    ])(
      'a permission with %s is a 400 naming the problem, and is not stored',
      async (_l, r, message) => {
        const name = `bad-${randomUUID().slice(0, 8)}`;
        expectError(
          await call(admin, 'POST', '/v1/rbac/permissions', { name, rules: r }),
          400,
          'invalid_request',
          message,
        );
        const list = await call(admin, 'GET', '/v1/rbac/permissions');
        expect((list.json as unknown as { name: string }[]).map((p) => p.name)).not.toContain(name);
      },
    );

    it('bad names are 400s, a duplicate is a 409 that leaves the first untouched', async () => {
      for (const name of ['', 'with space', '-dash-first', 'x'.repeat(65)]) {
        expectError(
          await call(admin, 'POST', '/v1/rbac/permissions', { name, rules }),
          400,
          'invalid_request',
          /names are 1 to 64/,
        );
      }
      expect(
        (await call(admin, 'POST', '/v1/rbac/permissions', { name: 'dup', rules })).status,
      ).toBe(201);
      expectError(
        await call(admin, 'POST', '/v1/rbac/permissions', {
          name: 'dup',
          rules: [{ effect: 'allow', actions: ['unit.write'], resources: ['**'] }],
        }),
        409,
        'conflict',
        /already exists/,
      );
      const list = await call(admin, 'GET', '/v1/rbac/permissions');
      const dup = (list.json as unknown as { name: string; rules: unknown[] }[]).find(
        (p) => p.name === 'dup',
      );
      expect(dup?.rules).toEqual([
        { effect: 'allow', actions: ['unit.read'], resources: ['team/**'], workspaces: null },
      ]);
      // an update with bad rules changes nothing either
      expectError(
        await call(admin, 'PUT', '/v1/rbac/permissions/dup', {
          rules: [{ effect: 'allow', actions: ['unit.read'], resources: ['a/**b'] }],
        }),
        400,
        'invalid_request',
      );
      const again = await call(admin, 'GET', '/v1/rbac/permissions');
      expect(
        (again.json as unknown as { name: string; rules: unknown[] }[]).find(
          (p) => p.name === 'dup',
        )?.rules,
      ).toEqual(dup?.rules);
    });
  });

  describe('roles', () => {
    beforeAll(async () => {
      const r = await call(admin, 'POST', '/v1/rbac/permissions', {
        name: 'role-perm',
        rules: [{ effect: 'allow', actions: ['unit.read'], resources: ['roles/**'] }],
      });
      expect(r.status).toBe(201);
    });

    it('create, list, update, delete; 404 and 409 where due', async () => {
      const c = await call(admin, 'POST', '/v1/rbac/roles', {
        name: 'role-a',
        description: 'a role',
        permissions: ['role-perm'],
      });
      expect(c.status).toBe(201);
      expect(c.json).toMatchObject({
        name: 'role-a',
        description: 'a role',
        permissions: ['role-perm'],
      });
      expectError(
        await call(admin, 'POST', '/v1/rbac/roles', { name: 'role-a', permissions: [] }),
        409,
        'conflict',
        /role role-a already exists/,
      );
      const u = await call(admin, 'PUT', '/v1/rbac/roles/role-a', {
        permissions: ['role-perm', 'dup'],
      });
      expect(u.status).toBe(200);
      expect(u.json).toMatchObject({ permissions: ['dup', 'role-perm'] });
      const list = await call(admin, 'GET', '/v1/rbac/roles');
      expect((list.json as unknown as { name: string }[]).map((x) => x.name)).toContain('role-a');
      expect((await call(admin, 'DELETE', '/v1/rbac/roles/role-a')).status).toBe(204);
      expectError(await call(admin, 'DELETE', '/v1/rbac/roles/role-a'), 404, 'not_found');
      expectError(
        await call(admin, 'PUT', '/v1/rbac/roles/role-a', { description: 'x' }),
        404,
        'not_found',
      );
    });

    it('a role naming an unknown permission is a 400 naming it, and is not created', async () => {
      expectError(
        await call(admin, 'POST', '/v1/rbac/roles', {
          name: 'role-b',
          permissions: ['role-perm', 'nope'],
        }),
        400,
        'invalid_request',
        /permission nope does not exist/,
      );
      const list = await call(admin, 'GET', '/v1/rbac/roles');
      expect((list.json as unknown as { name: string }[]).map((x) => x.name)).not.toContain(
        'role-b',
      );
      expectError(
        await call(admin, 'POST', '/v1/rbac/roles', { name: 'role b', permissions: [] }),
        400,
        'invalid_request',
        /role names are/,
      );
      expectError(
        await call(admin, 'POST', '/v1/rbac/roles', { name: 'role-c' }),
        400,
        'invalid_request',
        /permissions/,
      );
    });
  });

  describe('assignments', () => {
    it('assign to a subject, an email and a group; filter; duplicates, unknown roles and bad targets refused; unassign', async () => {
      const byEmail = await call(admin, 'POST', '/v1/rbac/assignments', {
        role: 'reader',
        email: 'ann@example.com',
      });
      expect(byEmail.status).toBe(201);
      expect(byEmail.json).toMatchObject({
        role: 'reader',
        subject_type: 'email',
        subject_value: 'ann@example.com',
        created_by: 'svc:admin',
      });
      const byGroup = await call(admin, 'POST', '/v1/rbac/assignments', {
        role: 'reader',
        group: 'auditors',
      });
      expect(byGroup.status).toBe(201);
      const bySubject = await call(admin, 'POST', '/v1/rbac/assignments', {
        role: 'reader',
        subject: 'svc:outsider',
      });
      expect(bySubject.status).toBe(201);

      const filtered = await call(admin, 'GET', '/v1/rbac/assignments?group=auditors');
      expect(filtered.status).toBe(200);
      expect((filtered.json as unknown as { id: string }[]).map((a) => a.id)).toEqual([
        byGroup.json.id,
      ]);

      expectError(
        await call(admin, 'POST', '/v1/rbac/assignments', { role: 'reader', group: 'auditors' }),
        409,
        'conflict',
        /already has role reader/,
      );
      expectError(
        await call(admin, 'POST', '/v1/rbac/assignments', {
          role: 'no-such-role',
          subject: 'svc:x',
        }),
        404,
        'not_found',
        /role no-such-role does not exist/,
      );
      expectError(
        await call(admin, 'POST', '/v1/rbac/assignments', {
          role: 'reader',
          subject: 'svc:x',
          group: 'g',
        }),
        400,
        'invalid_request',
        /exactly one of subject, email or group/,
      );
      expectError(
        await call(admin, 'POST', '/v1/rbac/assignments', { role: 'reader' }),
        400,
        'invalid_request',
        /exactly one of subject, email or group/,
      );
      expectError(
        await call(admin, 'POST', '/v1/rbac/assignments', { role: 'reader', email: 'nope' }),
        400,
        'invalid_request',
        /email/,
      );

      for (const a of [byEmail, byGroup, bySubject]) {
        expect(
          (await call(admin, 'DELETE', `/v1/rbac/assignments/${a.json.id as string}`)).status,
        ).toBe(204);
      }
      expectError(
        await call(admin, 'DELETE', `/v1/rbac/assignments/${byGroup.json.id as string}`),
        404,
        'not_found',
      );
      expectError(await call(admin, 'DELETE', '/v1/rbac/assignments/not-a-uuid'), 404, 'not_found');
    });
  });

  describe('403 without rbac.manage (svc:outsider has only the reader role here)', () => {
    beforeAll(async () => {
      expect(
        (
          await call(admin, 'POST', '/v1/rbac/assignments', {
            role: 'reader',
            subject: 'svc:outsider',
          })
        ).status,
      ).toBe(201);
    });

    it.each([
      ['GET', '/v1/rbac/permissions', undefined],
      [
        'POST',
        '/v1/rbac/permissions',
        { name: 'x1', rules: [{ effect: 'allow', actions: ['unit.read'], resources: ['**'] }] },
      ],
      ['PUT', '/v1/rbac/permissions/dup', { description: 'hijacked' }],
      ['DELETE', '/v1/rbac/permissions/dup', undefined],
      ['GET', '/v1/rbac/roles', undefined],
      ['POST', '/v1/rbac/roles', { name: 'x2', permissions: [] }],
      ['PUT', '/v1/rbac/roles/admin', { permissions: [] }],
      ['DELETE', '/v1/rbac/roles/admin', undefined],
      ['GET', '/v1/rbac/assignments', undefined],
      ['POST', '/v1/rbac/assignments', { role: 'admin', subject: 'svc:outsider' }],
      ['DELETE', `/v1/rbac/assignments/${randomUUID()}`, undefined],
      [
        'POST',
        '/v1/rbac/test',
        { subject: 'svc:admin', action: 'unit.read', resource: { unit: 'x' } },
      ],
      ['POST', '/v1/rbac/init', { admin: { subject: 'svc:outsider' } }],
    ] as [string, string, unknown][])(
      '%s %s → 403, nothing changes',
      async (method, path, body) => {
        const before = [
          (await call(admin, 'GET', '/v1/rbac/permissions')).text,
          (await call(admin, 'GET', '/v1/rbac/roles')).text,
          (await call(admin, 'GET', '/v1/rbac/assignments')).text,
        ];
        expectError(await call(outsider, method, path, body), 403, 'forbidden');
        expect([
          (await call(admin, 'GET', '/v1/rbac/permissions')).text,
          (await call(admin, 'GET', '/v1/rbac/roles')).text,
          (await call(admin, 'GET', '/v1/rbac/assignments')).text,
        ]).toEqual(before);
      },
    );
  });

  describe('POST /v1/rbac/test', () => {
    beforeAll(async () => {
      const p = await call(admin, 'POST', '/v1/rbac/permissions', {
        name: 'ci-prod',
        rules: [
          {
            effect: 'allow',
            actions: ['unit.read', 'unit.write'],
            resources: ['*/prod'],
            workspaces: ['prod'],
          },
          { effect: 'deny', actions: ['unit.write'], resources: ['legacy/prod'] },
        ],
      });
      expect(p.status).toBe(201);
      expect(
        (await call(admin, 'POST', '/v1/rbac/roles', { name: 'ci-prod', permissions: ['ci-prod'] }))
          .status,
      ).toBe(201);
      expect(
        (await call(admin, 'POST', '/v1/rbac/assignments', { role: 'ci-prod', subject: 'svc:ci' }))
          .status,
      ).toBe(201);
      expect(
        (await call(admin, 'POST', '/v1/rbac/assignments', { role: 'ci-prod', group: 'ci-group' }))
          .status,
      ).toBe(201);
    });

    const test = (body: unknown) => call(admin, 'POST', '/v1/rbac/test', body);

    it('answers allow with the granting rule', async () => {
      const r = await test({
        subject: 'svc:ci',
        action: 'unit.write',
        resource: { unit: 'net/prod', workspace: 'prod' },
      });
      expect(r.status).toBe(200);
      expect(r.json).toMatchObject({
        allowed: true,
        reason: 'rule',
        rule: {
          effect: 'allow',
          resources: ['*/prod'],
          workspaces: ['prod'],
          source: 'role ci-prod / permission ci-prod',
        },
      });
    });

    it('answers deny with the deny rule that won', async () => {
      const r = await test({
        subject: 'svc:ci',
        action: 'unit.write',
        resource: { unit: 'legacy/prod', workspace: 'prod' },
      });
      expect(r.json).toMatchObject({
        allowed: false,
        reason: 'rule',
        rule: { effect: 'deny', resources: ['legacy/prod'] },
      });
    });

    it('answers deny with no rule when nothing matches (other workspace, other unit, unknown subject)', async () => {
      for (const body of [
        {
          subject: 'svc:ci',
          action: 'unit.write',
          resource: { unit: 'net/prod', workspace: 'default' },
        },
        {
          subject: 'svc:ci',
          action: 'unit.write',
          resource: { unit: 'a/b/prod', workspace: 'prod' },
        },
        {
          subject: 'svc:stranger',
          action: 'unit.read',
          resource: { unit: 'net/prod', workspace: 'prod' },
        },
      ]) {
        const r = await test(body);
        expect(r.status).toBe(200);
        expect(r.json).toMatchObject({ allowed: false, reason: 'no-matching-rule' });
        expect(r.json.rule).toBeUndefined();
      }
    });

    it('works for groups and emails, and for server-wide actions', async () => {
      const g = await test({
        groups: ['x', 'ci-group'],
        action: 'unit.read',
        resource: { unit: 'net/prod', workspace: 'prod' },
      });
      expect(g.json).toMatchObject({ allowed: true, reason: 'rule' });
      const e = await test({
        email: 'nobody@example.com',
        action: 'unit.read',
        resource: { unit: 'net/prod', workspace: 'prod' },
      });
      expect(e.json).toMatchObject({ allowed: false });
      const a = await test({ subject: 'svc:admin', action: 'audit.read', resource: { unit: '*' } });
      expect(a.json).toMatchObject({
        allowed: true,
        reason: 'rule',
        rule: { source: 'role admin / permission admin-all' },
      });
    });

    it('refuses an unknown action and a missing resource with a 400', async () => {
      expectError(
        await test({ subject: 'svc:ci', action: 'unit.fly', resource: { unit: 'x' } }),
        400,
        'invalid_request',
        /unknown action unit\.fly/,
      );
      expectError(await test({ subject: 'svc:ci', action: 'unit.read' }), 400, 'invalid_request');
    });
  });

  describe('GET /v1/rbac/me', () => {
    it('lists my roles and rules (no rbac.manage needed)', async () => {
      const me = await call(tokens.outsider, 'GET', '/v1/rbac/me');
      expect(me.status).toBe(200);
      expect(me.json).toMatchObject({
        subject: 'svc:outsider',
        initialised: true,
        breakGlass: false,
        roles: ['reader'],
        rules: [
          {
            role: 'reader',
            permission: 'reader-all',
            effect: 'allow',
            actions: ['unit.read', 'version.read', 'graph.read'],
            resources: ['**'],
          },
        ],
      });
      const root = await call(server.token, 'GET', '/v1/rbac/me');
      expect(root.json).toMatchObject({ subject: 'bootstrap-admin', breakGlass: true });
      const a = await call(admin, 'GET', '/v1/rbac/me');
      expect(a.json).toMatchObject({ roles: ['admin'] });
    });
  });

  describe('revocation', () => {
    async function readAsDev(): Promise<number> {
      const r = await fetch(`${server.url}/v1/backend/rev/app`, {
        headers: { Authorization: `Bearer ${dev}` },
      });
      await r.arrayBuffer();
      return r.status;
    }

    beforeAll(async () => {
      const put = await fetch(`${server.url}/v1/backend/rev/app`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${server.token}`, 'Content-Type': 'application/json' },
        body: tfState(1),
      });
      expect(put.status).toBe(200);
      expect(
        (
          await call(admin, 'POST', '/v1/rbac/permissions', {
            name: 'rev-read',
            rules: [{ effect: 'allow', actions: ['unit.read'], resources: ['rev/**'] }],
          })
        ).status,
      ).toBe(201);
      expect(
        (await call(admin, 'POST', '/v1/rbac/roles', { name: 'rev', permissions: ['rev-read'] }))
          .status,
      ).toBe(201);
    });

    it('a deleted assignment stops working on the next request', async () => {
      expect(await readAsDev()).toBe(403);
      const a = await call(admin, 'POST', '/v1/rbac/assignments', {
        role: 'rev',
        subject: 'svc:dev',
      });
      expect(a.status).toBe(201);
      expect(await readAsDev()).toBe(200);
      expect(await readAsDev()).toBe(200);
      expect(
        (await call(admin, 'DELETE', `/v1/rbac/assignments/${a.json.id as string}`)).status,
      ).toBe(204);
      expect(await readAsDev()).toBe(403);
    });

    it('a changed rule, an emptied role and a deleted role stop working on the next request', async () => {
      const a = await call(admin, 'POST', '/v1/rbac/assignments', {
        role: 'rev',
        subject: 'svc:dev',
      });
      expect(a.status).toBe(201);
      expect(await readAsDev()).toBe(200);
      expect(
        (
          await call(admin, 'PUT', '/v1/rbac/permissions/rev-read', {
            rules: [
              { effect: 'allow', actions: ['unit.read'], resources: ['rev/**'] },
              { effect: 'deny', actions: ['unit.read'], resources: ['rev/app'] },
            ],
          })
        ).status,
      ).toBe(200);
      expect(await readAsDev()).toBe(403);
      expect(
        (
          await call(admin, 'PUT', '/v1/rbac/permissions/rev-read', {
            rules: [{ effect: 'allow', actions: ['unit.read'], resources: ['rev/**'] }],
          })
        ).status,
      ).toBe(200);
      expect(await readAsDev()).toBe(200);
      expect((await call(admin, 'PUT', '/v1/rbac/roles/rev', { permissions: [] })).status).toBe(
        200,
      );
      expect(await readAsDev()).toBe(403);
      expect(
        (await call(admin, 'PUT', '/v1/rbac/roles/rev', { permissions: ['rev-read'] })).status,
      ).toBe(200);
      expect(await readAsDev()).toBe(200);
      expect((await call(admin, 'DELETE', '/v1/rbac/roles/rev')).status).toBe(204);
      expect(await readAsDev()).toBe(403);
    });

    it('bootstrap-admin keeps every right after init (break glass)', async () => {
      const r = await fetch(`${server.url}/v1/backend/rev/app`, {
        headers: { Authorization: `Bearer ${server.token}` },
      });
      expect(r.status).toBe(200);
      expect((await call(server.token, 'GET', '/v1/rbac/permissions')).status).toBe(200);
    });
  });
});
