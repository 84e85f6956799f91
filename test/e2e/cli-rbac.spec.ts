import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freshServerEnv } from '../support/database';
import { CLI, TEST_TOKEN } from '../support/paths';
import { childEnv, NODE, RunningServer, spawnServer } from '../support/server';

/**
 * `statehouse rbac …` and `statehouse audit` as a user runs them: the CLI in a child process
 * against a real server. Setup acts as bootstrap-admin (STATEHOUSE_TOKEN = the bootstrap token);
 * API tokens for service principals act as the others.
 */

interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

interface AuditEvent {
  id: string;
  at: string;
  type: string;
  principal: string;
  action: string | null;
  resource: string | null;
  workspace: string | null;
  decision: string;
  details: Record<string, unknown> | null;
}

describe('statehouse rbac and statehouse audit', () => {
  let server: RunningServer;
  let cleanup: () => Promise<void>;
  const temps: string[] = [];
  /** API tokens of service principals, by subject. */
  const tokens: Record<string, string> = {};
  let home: string;

  function tempDir(): string {
    const dir = mkdtempSync(join(tmpdir(), 'statehouse-cli-rbac-'));
    temps.push(dir);
    return dir;
  }

  function cli(args: string[], token: string, stdin?: string): Promise<CliResult> {
    const proc = spawn(NODE, [CLI, ...args], {
      env: {
        ...childEnv(),
        NODE_ENV: 'production',
        HOME: home,
        XDG_CONFIG_HOME: join(home, 'xdg'),
        STATEHOUSE_SERVER: server.url,
        STATEHOUSE_TOKEN: token,
      },
      stdio: [stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    if (stdin !== undefined) proc.stdin?.end(stdin);
    let stdout = '';
    let stderr = '';
    proc.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
    proc.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    return new Promise((resolve) =>
      proc.once('close', (code) => resolve({ code, stdout, stderr })),
    );
  }

  const admin = (args: string[], stdin?: string): Promise<CliResult> =>
    cli(args, TEST_TOKEN, stdin);
  const as = (subject: string, args: string[]): Promise<CliResult> => cli(args, tokens[subject]);

  /** Exit 0 and nothing that looks like an error; the parsed stdout when `--json`. */
  function ok(r: CliResult): CliResult {
    if (r.code !== 0) throw new Error(`exit ${r.code}:\n${r.stderr}${r.stdout}`);
    expect(r.stderr).not.toMatch(/^statehouse:/m);
    return r;
  }

  async function api(method: string, path: string, body?: unknown): Promise<Response> {
    return fetch(`${server.url}${path}`, {
      method,
      headers: {
        ...server.auth,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
  }

  function state(serial: number): string {
    return JSON.stringify({
      version: 4,
      terraform_version: '1.11.0',
      serial,
      lineage: '0c6b7a7e-1111-2222-3333-444455556666',
      outputs: { id: { value: `v${serial}`, type: 'string' } },
      resources: [],
      check_results: null,
    });
  }

  /** Audit events as bootstrap-admin, polling: reads and refusals are written in batches. */
  async function auditUntil(
    args: string[],
    done: (events: AuditEvent[]) => boolean,
  ): Promise<AuditEvent[]> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const events = JSON.parse(ok(await admin(['audit', ...args, '--json'])).stdout);
      if (done(events) || Date.now() > deadline) return events;
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  beforeAll(async () => {
    home = tempDir();
    const fresh = await freshServerEnv();
    cleanup = fresh.cleanup;
    server = await spawnServer(fresh.env);
    // Before init only bootstrap-admin may create tokens for service principals.
    for (const subject of ['svc:ops', 'svc:ci', 'svc:outsider']) {
      const r = await api('POST', '/v1/auth/tokens', { name: subject.slice(4), subject });
      expect(r.status).toBe(201);
      tokens[subject] = ((await r.json()) as { token: string }).token;
    }
    for (const name of ['team-a/net', 'team-b/app']) {
      expect((await api('POST', '/v1/units', { name })).status).toBe(201);
      const put = await api('PUT', `/v1/units/${encodeURIComponent(name)}/state`, state(1));
      expect(put.status).toBe(200);
    }
  });

  afterAll(async () => {
    await server?.stop();
    await cleanup?.();
    for (const d of temps) rmSync(d, { recursive: true, force: true });
  });

  it('status before init; init needs exactly one admin subject (usage error, exit 2)', async () => {
    const s = ok(await admin(['rbac', 'status']));
    expect(s.stdout).toMatch(/^initialised: no\n/);
    expect(JSON.parse(ok(await admin(['rbac', 'status', '--json'])).stdout)).toMatchObject({
      initialised: false,
    });

    const none = await admin(['rbac', 'init']);
    expect(none.code).toBe(2);
    expect(none.stderr).toBe(
      'statehouse: name one of --admin-subject, --admin-email or --admin-group\n',
    );
    const two = await admin(['rbac', 'init', '--admin-subject', 'svc:ops', '--admin-group', 'x']);
    expect(two.code).toBe(2);
    expect(two.stderr).toMatch(/^statehouse: name only one of/);

    // Only bootstrap-admin may initialise.
    const notBootstrap = await as('svc:ci', ['rbac', 'init', '--admin-subject', 'svc:ci']);
    expect(notBootstrap.code).toBe(1);
    expect(notBootstrap.stderr).toBe(
      'statehouse: svc:ci may not initialise RBAC (bootstrap-admin only)\n',
    );
  });

  it('init makes the named subject admin, once', async () => {
    const r = ok(await admin(['rbac', 'init', '--admin-subject', 'svc:ops']));
    expect(r.stderr).toMatch(
      /^RBAC initialised: roles admin and reader created, admin assigned to subject svc:ops \(assignment [0-9a-f-]{36}\)/,
    );
    const again = await admin(['rbac', 'init', '--admin-subject', 'svc:ops']);
    expect(again.code).toBe(1);
    expect(again.stderr).toBe('statehouse: RBAC is already initialised\n');
    expect(ok(await admin(['rbac', 'status'])).stdout).toMatch(/^initialised: yes\n/);

    // The new admin manages RBAC through its rules.
    const roles = ok(await as('svc:ops', ['rbac', 'role', 'ls']));
    expect(roles.stdout).toMatch(/^NAME\s+PERMISSIONS\s+CREATED\s+DESCRIPTION\n/);
    expect(roles.stdout).toMatch(/^admin\s+admin-all\s/m);
    expect(roles.stdout).toMatch(/^reader\s+reader-all\s/m);
  });

  it('permission create with --rule, show prints the rules back in the same syntax', async () => {
    const created = ok(
      await as('svc:ops', [
        'rbac',
        'permission',
        'create',
        'team-a-rw',
        '--rule',
        'allow unit.read,unit.write,unit.lock team-a/**',
        '--rule',
        'deny  unit.write   team-a/**  ws=frozen,archive-*',
        '--description',
        'team A reads and writes its units',
      ]),
    );
    expect(created.stderr).toBe('Created permission team-a-rw with 2 rules.\n');

    const show = ok(await as('svc:ops', ['rbac', 'permission', 'show', 'team-a-rw']));
    expect(show.stdout).toMatch(/^name:\s+team-a-rw\n/);
    expect(show.stdout).toMatch(/^description:\s+team A reads and writes its units\n/m);
    expect(show.stdout).toContain('  allow unit.read,unit.write,unit.lock team-a/**\n');
    expect(show.stdout).toContain('  deny unit.write team-a/** ws=frozen,archive-*\n');

    const json = JSON.parse(
      ok(await as('svc:ops', ['rbac', 'permission', 'show', 'team-a-rw', '--json'])).stdout,
    );
    expect(json.rules).toEqual(
      expect.arrayContaining([
        {
          effect: 'allow',
          actions: ['unit.read', 'unit.write', 'unit.lock'],
          resources: ['team-a/**'],
          workspaces: null,
        },
        {
          effect: 'deny',
          actions: ['unit.write'],
          resources: ['team-a/**'],
          workspaces: ['frozen', 'archive-*'],
        },
      ]),
    );

    const ls = ok(await as('svc:ops', ['rbac', 'permission', 'ls']));
    expect(ls.stdout).toMatch(/^NAME\s+RULES\s+CREATED\s+DESCRIPTION\n/);
    expect(ls.stdout).toMatch(/^team-a-rw\s+2\s+.*team A reads and writes its units$/m);

    const missing = await as('svc:ops', ['rbac', 'permission', 'show', 'nope']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe('statehouse: permission nope does not exist\n');
  });

  it('permission create from --rules-file (the API JSON), and from stdin', async () => {
    const file = join(tempDir(), 'rules.json');
    writeFileSync(
      file,
      JSON.stringify([
        { effect: 'allow', actions: ['outputs.read'], resources: ['shared/network'] },
      ]),
    );
    ok(await as('svc:ops', ['rbac', 'permission', 'create', 'net-outputs', '--rules-file', file]));
    const fromStdin = ok(
      await admin(
        ['rbac', 'permission', 'create', 'audit-reader', '--rules-file', '-', '--json'],
        JSON.stringify({
          rules: [{ effect: 'allow', actions: ['audit.read'], resources: ['*'] }],
        }),
      ),
    );
    expect(JSON.parse(fromStdin.stdout)).toMatchObject({
      name: 'audit-reader',
      rules: [{ effect: 'allow', actions: ['audit.read'], resources: ['*'] }],
    });
  });

  it('bad rules: syntax is a usage error (exit 2), what the server refuses exits 1; nothing is created', async () => {
    const cases: [string[], number, RegExp][] = [
      [['--rule', 'permit unit.read team-a/**'], 2, /the effect is allow or deny, not permit/],
      [['--rule', 'allow unit.read'], 2, /expected EFFECT ACTIONS RESOURCES \[ws=WORKSPACES\]/],
      [['--rule', 'allow unit.read,,unit.write x'], 2, /ACTIONS is a comma-separated list/],
      [['--rule', 'allow unit.read x prod'], 2, /ws=WORKSPACES \(e\.g\. ws=prod,dev\), not prod/],
      [['--rule', 'allow unit.read x', '--rules-file', 'r.json'], 2, /not both/],
      [[], 2, /a permission needs rules/],
      [['--rules-file', '/nonexistent/rules.json'], 2, /cannot read \/nonexistent\/rules\.json/],
      [['--rule', 'allow unit.raed team-a/**'], 1, /rule 1: unknown action "unit\.raed"/],
      [['--rule', 'allow unit.read team-a/**x'], 1, /"\*\*" must be a whole segment/],
      [['--rule', 'allow rbac.manage team-a/**'], 1, /rbac\.manage take the resource "\*"/],
    ];
    for (const [extra, code, message] of cases) {
      const r = await as('svc:ops', ['rbac', 'permission', 'create', 'broken', ...extra]);
      expect({ extra, code: r.code }).toEqual({ extra, code });
      expect(r.stderr).toMatch(/^statehouse: [^\n]+\n$/);
      expect(r.stderr).toMatch(message);
    }
    const names = JSON.parse(
      ok(await as('svc:ops', ['rbac', 'permission', 'ls', '--json'])).stdout,
    ).map((p: { name: string }) => p.name);
    expect(names).not.toContain('broken');
  });

  let assignmentId: string;

  it('role create, unknown permission or role is a clear error; assign prints the ID', async () => {
    const created = ok(
      await as('svc:ops', [
        'rbac',
        'role',
        'create',
        'team-a',
        '--permission',
        'team-a-rw',
        '--permission',
        'net-outputs',
      ]),
    );
    expect(created.stderr).toBe('Created role team-a (net-outputs, team-a-rw).\n');

    const badPerm = await as('svc:ops', ['rbac', 'role', 'create', 'x', '--permission', 'nope']);
    expect(badPerm.code).toBe(1);
    expect(badPerm.stderr).toBe('statehouse: permission nope does not exist\n');
    const noPerm = await as('svc:ops', ['rbac', 'role', 'create', 'x']);
    expect(noPerm.code).toBe(2);

    const badRole = await as('svc:ops', ['rbac', 'assign', 'nope', '--subject', 'svc:ci']);
    expect(badRole.code).toBe(1);
    expect(badRole.stderr).toBe('statehouse: role nope does not exist\n');
    const noSubject = await as('svc:ops', ['rbac', 'assign', 'team-a']);
    expect(noSubject.code).toBe(2);
    expect(noSubject.stderr).toBe('statehouse: name one of --subject, --email or --group\n');

    const assigned = ok(await as('svc:ops', ['rbac', 'assign', 'team-a', '--subject', 'svc:ci']));
    assignmentId = assigned.stdout.trim();
    expect(assignmentId).toMatch(UUID);
    expect(assigned.stderr).toContain('Assigned role team-a to subject svc:ci.');
    expect(assigned.stderr).toContain(`statehouse rbac revoke ${assignmentId}`);

    const twice = await as('svc:ops', ['rbac', 'assign', 'team-a', '--subject', 'svc:ci']);
    expect(twice.code).toBe(1);
    expect(twice.stderr).toBe('statehouse: subject svc:ci already has role team-a\n');

    const list = ok(await as('svc:ops', ['rbac', 'assignments', '--subject', 'svc:ci']));
    expect(list.stdout).toMatch(/^ID\s+ROLE\s+ASSIGNED TO\s+CREATED\s+BY\n/);
    expect(list.stdout).toMatch(
      new RegExp(`^${assignmentId}\\s+team-a\\s+subject svc:ci\\s+\\S+ \\S+\\s+svc:ops$`, 'm'),
    );
    expect(list.stdout.trim().split('\n')).toHaveLength(2); // the admin's is filtered out
    const all = JSON.parse(ok(await as('svc:ops', ['rbac', 'assignments', '--json'])).stdout);
    expect(all.map((a: { subject_value: string }) => a.subject_value).sort()).toEqual([
      'svc:ci',
      'svc:ops',
    ]);

    const role = ok(await as('svc:ops', ['rbac', 'role', 'show', 'team-a']));
    expect(role.stdout).toMatch(
      /^permissions:\n {2}net-outputs\n {4}allow outputs.read shared\/network\n {2}team-a-rw\n/m,
    );
    expect(role.stdout).toContain('    allow unit.read,unit.write,unit.lock team-a/**\n');
    expect(role.stdout).toContain(`  subject svc:ci (${assignmentId})`);
  });

  /** A deny: exit code 4 (like a red `unit status`), the answer on stdout, no error line. */
  function denied(r: CliResult): CliResult {
    if (r.code !== 4)
      throw new Error(`exit ${r.code} (expected 4, a deny):\n${r.stderr}${r.stdout}`);
    expect(r.stderr).toBe('');
    return r;
  }

  it('rbac test: allow (exit 0) and deny (exit 4) with the deciding rule', async () => {
    const allow = ok(
      await as('svc:ops', ['rbac', 'test', '--subject', 'svc:ci', 'unit.write', 'team-a/net']),
    );
    expect(allow.stdout).toBe(
      [
        'decision:   allow',
        'who:        svc:ci',
        'action:     unit.write',
        'resource:   team-a/net',
        'decided by: role team-a / permission team-a-rw: allow unit.read,unit.write,unit.lock team-a/**',
        '',
      ].join('\n'),
    );

    const noRule = denied(
      await as('svc:ops', ['rbac', 'test', '--subject', 'svc:ci', 'unit.read', 'team-b/app']),
    );
    expect(noRule.stdout).toMatch(/^decision:\s+deny\n/);
    expect(noRule.stdout).toMatch(/^decided by: no rule allows it/m);

    const frozen = denied(
      await as('svc:ops', [
        'rbac',
        'test',
        '--subject',
        'svc:ci',
        'unit.write',
        'team-a/net',
        '-w',
        'frozen',
      ]),
    );
    expect(frozen.stdout).toMatch(/^decision:\s+deny\n/);
    expect(frozen.stdout).toMatch(/^resource:\s+team-a\/net \(workspace frozen\)\n/m);
    expect(frozen.stdout).toMatch(
      /^decided by: role team-a \/ permission team-a-rw: deny unit.write team-a\/\*\* ws=frozen,archive-\*\n/m,
    );

    const json = JSON.parse(
      denied(
        await as('svc:ops', [
          'rbac',
          'test',
          '--group',
          'nobody',
          'outputs.read',
          'shared/network',
          '--json',
        ]),
      ).stdout,
    );
    expect(json).toEqual({ allowed: false, reason: 'no-matching-rule' });

    const none = await as('svc:ops', ['rbac', 'test', 'unit.read', 'team-a/net']);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/^statehouse: name who to test/);
    const unknown = await as('svc:ops', [
      'rbac',
      'test',
      '--subject',
      'svc:ci',
      'unit.fly',
      'team-a/net',
    ]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toBe('statehouse: unknown action unit.fly\n');
  });

  it('rbac me as the assigned principal; it may use its units and no others, nor manage RBAC', async () => {
    const me = ok(await as('svc:ci', ['rbac', 'me']));
    expect(me.stdout).toMatch(/^subject:\s+svc:ci\n/);
    expect(me.stdout).toMatch(/^roles:\s+team-a\n/m);
    expect(me.stdout).toMatch(/^ROLE\s+PERMISSION\s+EFFECT\s+ACTIONS\s+RESOURCES\s+WORKSPACES\n/m);
    expect(me.stdout).toMatch(
      /^team-a\s+team-a-rw\s+allow\s+unit\.read,unit\.write,unit\.lock\s+team-a\/\*\*\s+\*$/m,
    );
    expect(me.stdout).toMatch(
      /^team-a\s+team-a-rw\s+deny\s+unit\.write\s+team-a\/\*\*\s+frozen,archive-\*$/m,
    );
    const json = JSON.parse(ok(await as('svc:ci', ['rbac', 'me', '--json'])).stdout);
    expect(json).toMatchObject({ subject: 'svc:ci', initialised: true, roles: ['team-a'] });
    expect(json.rules).toHaveLength(3);

    const outsider = ok(await as('svc:outsider', ['rbac', 'me']));
    expect(outsider.stdout).toMatch(/^roles:\s+-\n/m);
    expect(outsider.stdout).toContain('No rules apply to you: every action is denied.');

    const units = ok(await as('svc:ci', ['unit', 'ls']));
    expect(units.stdout).toMatch(/^team-a\/net\s/m);
    expect(units.stdout).not.toContain('team-b/app');
    expect(ok(await as('svc:ci', ['unit', 'pull', 'team-a/net'])).stdout).toContain('"v1"');
    const other = await as('svc:ci', ['unit', 'pull', 'team-b/app']);
    expect(other.code).toBe(1);
    expect(other.stderr).toMatch(/^statehouse: svc:ci may not unit\.read on team-b\/app/);

    const manage = await as('svc:ci', ['rbac', 'permission', 'ls']);
    expect(manage.code).toBe(1);
    expect(manage.stderr).toBe('statehouse: svc:ci may not rbac.manage on *\n');
  });

  it('revoke: the principal is refused at once; revoking again is an error', async () => {
    const revoked = ok(await as('svc:ops', ['rbac', 'revoke', assignmentId]));
    expect(revoked.stderr).toContain(`Revoked assignment ${assignmentId}`);

    const units = ok(await as('svc:ci', ['unit', 'ls']));
    expect(units.stdout).not.toContain('team-a/net');
    const pull = await as('svc:ci', ['unit', 'pull', 'team-a/net']);
    expect(pull.code).toBe(1);
    expect(pull.stdout).toBe('');
    expect(pull.stderr).toMatch(/^statehouse: svc:ci may not unit\.read on team-a\/net/);
    expect(ok(await as('svc:ci', ['rbac', 'me'])).stdout).toMatch(/^roles:\s+-\n/m);

    const again = await as('svc:ops', ['rbac', 'revoke', assignmentId]);
    expect(again.code).toBe(1);
    expect(again.stderr).toBe(`statehouse: assignment ${assignmentId} does not exist\n`);
  });

  it('update and rm of permissions and roles', async () => {
    const upd = ok(
      await as('svc:ops', [
        'rbac',
        'permission',
        'update',
        'net-outputs',
        '--rule',
        'allow outputs.read,outputs.read-sensitive shared/**',
      ]),
    );
    expect(upd.stderr).toBe('Updated permission net-outputs (now 1 rule).\n');
    expect(ok(await as('svc:ops', ['rbac', 'permission', 'show', 'net-outputs'])).stdout).toContain(
      '  allow outputs.read,outputs.read-sensitive shared/**\n',
    );
    const nothing = await as('svc:ops', ['rbac', 'permission', 'update', 'net-outputs']);
    expect(nothing.code).toBe(2);

    const role = JSON.parse(
      ok(
        await as('svc:ops', [
          'rbac',
          'role',
          'update',
          'team-a',
          '--permission',
          'net-outputs',
          '--description',
          'consumers',
          '--json',
        ]),
      ).stdout,
    );
    expect(role).toMatchObject({
      name: 'team-a',
      description: 'consumers',
      permissions: ['net-outputs'],
    });

    ok(await as('svc:ops', ['rbac', 'assign', 'team-a', '--group', 'consumers']));
    ok(await as('svc:ops', ['rbac', 'role', 'rm', 'team-a']));
    expect(
      JSON.parse(
        ok(await as('svc:ops', ['rbac', 'assignments', '--group', 'consumers', '--json'])).stdout,
      ),
    ).toEqual([]);
    const gone = await as('svc:ops', ['rbac', 'role', 'rm', 'team-a']);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toBe('statehouse: role team-a does not exist\n');
    ok(await as('svc:ops', ['rbac', 'permission', 'rm', 'net-outputs']));
    const permGone = await as('svc:ops', ['rbac', 'permission', 'rm', 'net-outputs']);
    expect(permGone.code).toBe(1);
    expect(permGone.stderr).toBe('statehouse: permission net-outputs does not exist\n');
  });

  it('audit shows the RBAC changes; the filters work; it needs audit.read', async () => {
    const changes = await auditUntil(['--type', 'rbac.change', '--all'], () => true);
    const ops = changes.map((e) => e.details?.op);
    expect(ops).toEqual(
      expect.arrayContaining([
        'permission.create',
        'role.create',
        'assign',
        'unassign',
        'permission.update',
        'role.update',
        'role.delete',
        'permission.delete',
      ]),
    );
    expect(changes.every((e) => e.type === 'rbac.change' && e.action === 'rbac.manage')).toBe(true);
    const unassign = changes.find((e) => e.details?.op === 'unassign');
    expect(unassign).toMatchObject({ principal: 'svc:ops', decision: 'success' });
    expect(unassign?.details?.id).toBe(assignmentId);
    // Newest first.
    const times = changes.map((e) => Date.parse(e.at));
    expect([...times].sort((a, b) => b - a)).toEqual(times);

    const init = await auditUntil(['--type', 'rbac.init'], (e) => e.length > 0);
    expect(init).toHaveLength(1);
    expect(init[0]).toMatchObject({ principal: 'bootstrap-admin', type: 'rbac.init' });

    // Refusals are written in batches: poll for the 403s of svc:ci.
    const denied = await auditUntil(
      ['--principal', 'svc:ci', '--type', 'authz.denied', '--resource', 'team-a/net'],
      (e) => e.some((x) => x.action === 'unit.read'),
    );
    expect(denied.length).toBeGreaterThan(0);
    expect(
      denied.every(
        (e) => e.principal === 'svc:ci' && e.resource === 'team-a/net' && e.decision === 'denied',
      ),
    ).toBe(true);

    const byAction = await auditUntil(
      ['--action', 'rbac.manage', '--principal', 'svc:ci'],
      (e) => e.length > 0,
    );
    expect(byAction.length).toBeGreaterThan(0);
    expect(byAction.every((e) => e.action === 'rbac.manage' && e.principal === 'svc:ci')).toBe(
      true,
    );

    const table = ok(await admin(['audit', '--type', 'rbac.change']));
    expect(table.stdout).toMatch(
      /^TIME\s+TYPE\s+PRINCIPAL\s+ACTION\s+RESOURCE\s+DECISION\s+DOOR\s+DETAILS\n/,
    );
    expect(table.stdout).toMatch(
      /rbac\.change\s+svc:ops\s+rbac\.manage\s+-\s+success\s.*op=assign role=team-a subject=svc:ci/,
    );

    const two = ok(await admin(['audit', '--type', 'rbac.change', '--limit', '2']));
    expect(two.stdout.trim().split('\n')).toHaveLength(3); // header + 2
    const more = /--cursor (\d+)/.exec(two.stderr);
    expect(more).not.toBeNull();
    const next = JSON.parse(
      ok(
        await admin([
          'audit',
          '--type',
          'rbac.change',
          '--limit',
          '2',
          '--cursor',
          more![1],
          '--json',
        ]),
      ).stdout,
    ) as AuditEvent[];
    expect(next.map((e) => e.id)).toEqual(changes.slice(2, 4).map((e) => e.id));

    const future = ok(await admin(['audit', '--since', '2999-01-01T00:00:00Z']));
    expect(future.stdout).toBe('');
    expect(future.stderr).toBe('No matching events.\n');
    const past = JSON.parse(ok(await admin(['audit', '--until', '2000-01-01', '--json'])).stdout);
    expect(past).toEqual([]);

    for (const bad of [
      ['--since', 'yesterday'],
      ['--limit', '0'],
      ['--limit', 'ten'],
      ['--all', '--limit', '5'],
      ['--since', '2030-01-01', '--until', '2020-01-01'],
    ]) {
      const r = await admin(['audit', ...bad]);
      expect({ bad, code: r.code }).toEqual({ bad, code: 2 });
      expect(r.stderr).toMatch(/^statehouse: [^\n]+\n$/);
    }

    const refused = await as('svc:ci', ['audit']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe('statehouse: svc:ci may not audit.read on *\n');
  });
});
