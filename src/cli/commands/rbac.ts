import type { Command } from 'commander';
import { readFileSync } from 'node:fs';
import type {
  RbacAssignment,
  RbacMe,
  RbacPermission,
  RbacRole,
  RbacRule,
  RbacStatus,
  RbacTestResult,
} from '../api-types';
import { CliError, UsageError } from '../errors';
import { note, orDash, out, printJson, table, when } from '../output';
import { handled } from '../run';
import { formatRule, parseRule } from '../rbac-rule-syntax';
import { clientFor } from '../session';

// `statehouse rbac …`: roles, permissions, assignments and the one-time init, over
// /v1/rbac (see openapi/openapi.json). Everything but `status` and `me` needs `rbac.manage`;
// `init` is bootstrap-admin's.
//
// The `--rule` syntax lives in ../rbac-rule-syntax.ts; `--rules-file FILE` takes the API's
// JSON instead: an array of {effect, actions, resources, workspaces?}, or an object with such
// a `rules` array.

interface JsonOption {
  json?: boolean;
}

// ------------------------------------------------------------------ rules

function readRulesFile(file: string): RbacRule[] {
  let text: string;
  try {
    text = readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (e) {
    throw new CliError(`cannot read ${file}: ${(e as Error).message}`, 2);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw new UsageError(`${file} is not JSON: ${(e as Error).message}`);
  }
  const rules =
    typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)
      ? (parsed as { rules?: unknown }).rules
      : parsed;
  if (
    !Array.isArray(rules) ||
    !rules.every((r) => typeof r === 'object' && r !== null && !Array.isArray(r))
  ) {
    throw new UsageError(
      `${file} must hold a JSON array of rules {effect, actions, resources, workspaces?} (or an object with such a "rules" array)`,
    );
  }
  return rules as RbacRule[];
}

/** The rules given by `--rule …` or `--rules-file`; undefined when neither is given. */
function rulesOf(opts: { rule: string[]; rulesFile?: string }): RbacRule[] | undefined {
  if (opts.rule.length > 0 && opts.rulesFile !== undefined) {
    throw new UsageError('give the rules with --rule or with --rules-file, not both');
  }
  if (opts.rulesFile !== undefined) return readRulesFile(opts.rulesFile);
  if (opts.rule.length > 0) return opts.rule.map(parseRule);
  return undefined;
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

// ------------------------------------------------------------------ subjects

interface SubjectOptions {
  subject?: string;
  email?: string;
  group?: string;
}

/** Exactly one of --subject, --email, --group (with `prefix`, e.g. --admin-subject). */
function oneSubject(
  opts: SubjectOptions,
  prefix = '',
  required = true,
): { subject?: string; email?: string; group?: string } | undefined {
  const given = (['subject', 'email', 'group'] as const).filter((k) => opts[k] !== undefined);
  const names = `--${prefix}subject, --${prefix}email or --${prefix}group`;
  if (given.length > 1) throw new UsageError(`name only one of ${names}`);
  if (given.length === 0) {
    if (required) throw new UsageError(`name one of ${names}`);
    return undefined;
  }
  const key = given[0];
  const value = opts[key] as string;
  if (value === '') throw new UsageError(`--${prefix}${key} needs a value`);
  return { [key]: value };
}

function describeAssignee(a: RbacAssignment): string {
  return `${a.subject_type} ${a.subject_value}`;
}

// ------------------------------------------------------------------ init, status, me

async function init(
  opts: JsonOption & { adminSubject?: string; adminEmail?: string; adminGroup?: string },
  cmd: Command,
): Promise<void> {
  const admin = oneSubject(
    { subject: opts.adminSubject, email: opts.adminEmail, group: opts.adminGroup },
    'admin-',
  );
  const result = await clientFor(cmd).json<{ initialised: boolean; admin: RbacAssignment }>(
    'POST',
    '/v1/rbac/init',
    { json: { admin } },
  );
  if (opts.json) {
    printJson(result);
    return;
  }
  note(
    `RBAC initialised: roles admin and reader created, admin assigned to ${describeAssignee(result.admin)} ` +
      `(assignment ${result.admin.id}). From now on every action is decided by the rules.`,
  );
}

async function status(opts: JsonOption, cmd: Command): Promise<void> {
  const s = await clientFor(cmd).json<RbacStatus>('GET', '/v1/rbac/status');
  if (opts.json) {
    printJson(s);
    return;
  }
  out(`initialised: ${s.initialised ? 'yes' : 'no'}\nmode:        ${s.mode}`);
}

function rulesTable(rules: RbacMe['rules']): string {
  return table(
    ['ROLE', 'PERMISSION', 'EFFECT', 'ACTIONS', 'RESOURCES', 'WORKSPACES'],
    rules.map((r) => [
      r.role,
      r.permission,
      r.effect,
      r.actions.join(','),
      r.resources.join(','),
      r.workspaces && r.workspaces.length > 0 ? r.workspaces.join(',') : '*',
    ]),
  );
}

async function me(opts: JsonOption, cmd: Command): Promise<void> {
  const m = await clientFor(cmd).json<RbacMe>('GET', '/v1/rbac/me');
  if (opts.json) {
    printJson(m);
    return;
  }
  const head = [
    `subject:     ${m.subject}`,
    `email:       ${orDash(m.email)}`,
    `groups:      ${m.groups.length > 0 ? m.groups.join(', ') : '-'}`,
    `initialised: ${m.initialised ? 'yes' : 'no (authenticated principals may use units)'}`,
  ];
  if (m.breakGlass) head.push('break-glass: yes (bootstrap-admin has every right)');
  head.push(`roles:       ${m.roles.length > 0 ? m.roles.join(', ') : '-'}`);
  out(
    m.rules.length > 0
      ? `${head.join('\n')}\n\n${rulesTable(m.rules)}`
      : `${head.join('\n')}\n\nNo rules apply to you${m.initialised && !m.breakGlass ? ': every action is denied' : ''}.`,
  );
}

// ------------------------------------------------------------------ permissions

function permissionPath(name: string): string {
  return `/v1/rbac/permissions/${encodeURIComponent(name)}`;
}

function printPermission(p: RbacPermission): void {
  out(
    [
      `name:        ${p.name}`,
      `description: ${orDash(p.description)}`,
      `created:     ${when(p.created_at)}`,
      'rules:',
      ...p.rules.map((r) => `  ${formatRule(r)}`),
    ].join('\n'),
  );
}

async function permissionLs(opts: JsonOption, cmd: Command): Promise<void> {
  const perms = await clientFor(cmd).json<RbacPermission[]>('GET', '/v1/rbac/permissions');
  if (opts.json) {
    printJson(perms);
    return;
  }
  if (perms.length === 0) {
    note('No permissions.');
    return;
  }
  out(
    table(
      ['NAME', 'RULES', 'CREATED', 'DESCRIPTION'],
      perms.map((p) => [p.name, String(p.rules.length), when(p.created_at), p.description]),
    ),
  );
}

async function permissionShow(name: string, opts: JsonOption, cmd: Command): Promise<void> {
  const perms = await clientFor(cmd).json<RbacPermission[]>('GET', '/v1/rbac/permissions');
  const p = perms.find((x) => x.name === name);
  if (!p) throw new CliError(`permission ${name} does not exist`);
  if (opts.json) printJson(p);
  else printPermission(p);
}

interface PermissionOptions extends JsonOption {
  rule: string[];
  rulesFile?: string;
  description?: string;
}

async function permissionCreate(
  name: string,
  opts: PermissionOptions,
  cmd: Command,
): Promise<void> {
  const rules = rulesOf(opts);
  if (!rules)
    throw new UsageError('a permission needs rules: --rule RULE (repeatable) or --rules-file FILE');
  const p = await clientFor(cmd).json<RbacPermission>('POST', '/v1/rbac/permissions', {
    json: { name, description: opts.description, rules },
  });
  if (opts.json) printJson(p);
  else
    note(
      `Created permission ${p.name} with ${p.rules.length} rule${p.rules.length === 1 ? '' : 's'}.`,
    );
}

async function permissionUpdate(
  name: string,
  opts: PermissionOptions,
  cmd: Command,
): Promise<void> {
  const rules = rulesOf(opts);
  if (!rules && opts.description === undefined) {
    throw new UsageError(
      'nothing to change: give --rule/--rules-file (replaces every rule) and/or --description',
    );
  }
  const p = await clientFor(cmd).json<RbacPermission>('PUT', permissionPath(name), {
    json: { description: opts.description, rules },
  });
  if (opts.json) printJson(p);
  else
    note(
      `Updated permission ${p.name}${rules ? ` (now ${p.rules.length} rule${p.rules.length === 1 ? '' : 's'})` : ''}.`,
    );
}

async function permissionRm(name: string, _opts: object, cmd: Command): Promise<void> {
  await clientFor(cmd).call('DELETE', permissionPath(name));
  note(`Deleted permission ${name}.`);
}

// ------------------------------------------------------------------ roles

function rolePath(name: string): string {
  return `/v1/rbac/roles/${encodeURIComponent(name)}`;
}

async function roleLs(opts: JsonOption, cmd: Command): Promise<void> {
  const roles = await clientFor(cmd).json<RbacRole[]>('GET', '/v1/rbac/roles');
  if (opts.json) {
    printJson(roles);
    return;
  }
  if (roles.length === 0) {
    note('No roles.');
    return;
  }
  out(
    table(
      ['NAME', 'PERMISSIONS', 'CREATED', 'DESCRIPTION'],
      roles.map((r) => [
        r.name,
        r.permissions.length > 0 ? r.permissions.join(',') : '-',
        when(r.created_at),
        r.description,
      ]),
    ),
  );
}

async function roleShow(name: string, opts: JsonOption, cmd: Command): Promise<void> {
  const client = clientFor(cmd);
  const roles = await client.json<RbacRole[]>('GET', '/v1/rbac/roles');
  const r = roles.find((x) => x.name === name);
  if (!r) throw new CliError(`role ${name} does not exist`);
  const perms = await client.json<RbacPermission[]>('GET', '/v1/rbac/permissions');
  const assignments = (await client.json<RbacAssignment[]>('GET', '/v1/rbac/assignments')).filter(
    (a) => a.role === name,
  );
  if (opts.json) {
    printJson({
      ...r,
      rules: perms
        .filter((p) => r.permissions.includes(p.name))
        .flatMap((p) => p.rules.map((rule) => ({ permission: p.name, ...rule }))),
      assignments,
    });
    return;
  }
  const lines = [
    `name:        ${r.name}`,
    `description: ${orDash(r.description)}`,
    `created:     ${when(r.created_at)}`,
    'permissions:',
  ];
  for (const pname of r.permissions) {
    lines.push(`  ${pname}`);
    for (const rule of perms.find((p) => p.name === pname)?.rules ?? []) {
      lines.push(`    ${formatRule(rule)}`);
    }
  }
  lines.push('assigned to:');
  if (assignments.length === 0) lines.push('  -');
  for (const a of assignments) lines.push(`  ${describeAssignee(a)} (${a.id})`);
  out(lines.join('\n'));
}

interface RoleOptions extends JsonOption {
  permission: string[];
  description?: string;
}

async function roleCreate(name: string, opts: RoleOptions, cmd: Command): Promise<void> {
  if (opts.permission.length === 0) {
    throw new UsageError('a role needs permissions: --permission NAME (repeatable)');
  }
  const r = await clientFor(cmd).json<RbacRole>('POST', '/v1/rbac/roles', {
    json: { name, description: opts.description, permissions: opts.permission },
  });
  if (opts.json) printJson(r);
  else note(`Created role ${r.name} (${r.permissions.join(', ')}).`);
}

async function roleUpdate(name: string, opts: RoleOptions, cmd: Command): Promise<void> {
  if (opts.permission.length === 0 && opts.description === undefined) {
    throw new UsageError(
      'nothing to change: give --permission (replaces every permission) and/or --description',
    );
  }
  const r = await clientFor(cmd).json<RbacRole>('PUT', rolePath(name), {
    json: {
      description: opts.description,
      permissions: opts.permission.length > 0 ? opts.permission : undefined,
    },
  });
  if (opts.json) printJson(r);
  else note(`Updated role ${r.name} (${r.permissions.join(', ') || 'no permissions'}).`);
}

async function roleRm(name: string, _opts: object, cmd: Command): Promise<void> {
  await clientFor(cmd).call('DELETE', rolePath(name));
  note(`Deleted role ${name} and its assignments.`);
}

// ------------------------------------------------------------------ assignments

async function assign(
  role: string,
  opts: JsonOption & SubjectOptions,
  cmd: Command,
): Promise<void> {
  const target = oneSubject(opts);
  const a = await clientFor(cmd).json<RbacAssignment>('POST', '/v1/rbac/assignments', {
    json: { role, ...target },
  });
  if (opts.json) {
    printJson(a);
    return;
  }
  note(`Assigned role ${a.role} to ${describeAssignee(a)}. Revoke it with:`);
  note(`  statehouse rbac revoke ${a.id}`);
  out(a.id);
}

async function revoke(id: string, _opts: object, cmd: Command): Promise<void> {
  await clientFor(cmd).call('DELETE', `/v1/rbac/assignments/${encodeURIComponent(id)}`);
  note(`Revoked assignment ${id} (in effect within a second on every replica).`);
}

async function assignments(opts: JsonOption & SubjectOptions, cmd: Command): Promise<void> {
  const filter = oneSubject(opts, '', false);
  const items = await clientFor(cmd).json<RbacAssignment[]>('GET', '/v1/rbac/assignments', {
    query: filter,
  });
  if (opts.json) {
    printJson(items);
    return;
  }
  if (items.length === 0) {
    note(filter ? 'No assignments for that subject.' : 'No assignments.');
    return;
  }
  out(
    table(
      ['ID', 'ROLE', 'ASSIGNED TO', 'CREATED', 'BY'],
      items.map((a) => [a.id, a.role, describeAssignee(a), when(a.created_at), a.created_by]),
    ),
  );
}

// ------------------------------------------------------------------ test

interface TestOptions extends JsonOption {
  subject?: string;
  email?: string;
  group: string[];
  workspace?: string;
}

/** `rbac test`'s exit code for a deny. */
const DENIED_EXIT_CODE = 4;

async function test(action: string, unit: string, opts: TestOptions, cmd: Command): Promise<void> {
  if (opts.subject === undefined && opts.email === undefined && opts.group.length === 0) {
    throw new UsageError('name who to test: --subject, --email and/or --group (repeatable)');
  }
  const resource = { unit, ...(opts.workspace !== undefined ? { workspace: opts.workspace } : {}) };
  const r = await clientFor(cmd).json<RbacTestResult>('POST', '/v1/rbac/test', {
    json: {
      subject: opts.subject,
      email: opts.email,
      groups: opts.group.length > 0 ? opts.group : undefined,
      action,
      resource,
    },
  });
  // Scripts can test the decision, as with `unit status`: 0 allow, 4 deny (1 error, 2 usage).
  process.exitCode = r.allowed ? 0 : DENIED_EXIT_CODE;
  if (opts.json) {
    printJson(r);
    return;
  }
  const who = [opts.subject, opts.email, ...opts.group.map((g) => `group ${g}`)].filter(
    (x): x is string => x !== undefined,
  );
  const where = opts.workspace !== undefined ? `${unit} (workspace ${opts.workspace})` : unit;
  let why: string;
  switch (r.reason) {
    case 'bootstrap':
      why = 'bootstrap-admin has every right';
      break;
    case 'not-initialised':
      why = r.allowed
        ? 'RBAC is not initialised: authenticated principals may use units'
        : 'RBAC is not initialised: only bootstrap-admin may take this action';
      break;
    case 'rule':
      why = r.rule ? `${r.rule.source ?? 'a rule'}: ${formatRule(r.rule)}` : 'a rule';
      break;
    default:
      why = 'no rule allows it (no matching allow is a deny)';
  }
  out(
    [
      `decision:   ${r.allowed ? 'allow' : 'deny'}`,
      `who:        ${who.join(', ')}`,
      `action:     ${action}`,
      `resource:   ${where}`,
      `decided by: ${why}`,
    ].join('\n'),
  );
}

// ------------------------------------------------------------------ registration

export function registerRbacCommands(program: Command): void {
  const rbac = program
    .command('rbac')
    .description('roles, permissions and assignments (who may do what to which units)')
    .addHelpText(
      'after',
      `
Rules (--rule, repeatable; quote each one):
  EFFECT ACTIONS RESOURCES [ws=WORKSPACES]
    EFFECT      allow or deny (an explicit deny beats any allow)
    ACTIONS     comma-separated: unit.read,unit.write,outputs.read,…
    RESOURCES   comma-separated globs over unit names: * within a segment,
                ** across segments; * for rbac.manage, token.manage, audit.read
    ws=…        optional: only in these workspaces (comma-separated, * allowed)
  e.g. --rule 'allow unit.read,unit.write team-a/**' --rule 'allow unit.write */prod ws=prod'
`,
    );

  rbac
    .command('init')
    .description(
      'initialise RBAC once: roles admin and reader, admin assigned (bootstrap-admin only)',
    )
    .option(
      '--admin-subject <subject>',
      'the principal to make admin, e.g. user:00u1abcd or svc:ops',
    )
    .option('--admin-email <email>', 'the verified email to make admin')
    .option('--admin-group <group>', 'the OIDC group to make admin')
    .option('--json', 'print JSON')
    .action(handled(init));
  rbac
    .command('status')
    .description('whether RBAC is initialised, and what that means')
    .option('--json', 'print JSON')
    .action(handled(status));
  rbac
    .command('me')
    .description('your roles and the rules that apply to you')
    .option('--json', 'print JSON')
    .action(handled(me));

  const permission = rbac
    .command('permission')
    .alias('permissions')
    .description('permissions: named sets of allow/deny rules');
  permission
    .command('ls')
    .alias('list')
    .description('list permissions')
    .option('--json', 'print JSON')
    .action(handled(permissionLs));
  permission
    .command('show <name>')
    .description('show a permission and its rules (in --rule syntax)')
    .option('--json', 'print JSON')
    .action(handled(permissionShow));
  const ruleOptions = (c: Command): Command =>
    c
      .option(
        '--rule <rule>',
        "a rule: 'EFFECT ACTIONS RESOURCES [ws=WORKSPACES]' (repeatable)",
        collect,
        [],
      )
      .option('--rules-file <file>', 'the rules as the API\'s JSON array ("-" reads stdin)')
      .option('--description <text>', 'what the permission is for')
      .option('--json', 'print JSON');
  ruleOptions(
    permission.command('create <name>').description('create a permission from rules'),
  ).action(handled(permissionCreate));
  ruleOptions(
    permission
      .command('update <name>')
      .description("replace a permission's rules and/or change its description"),
  ).action(handled(permissionUpdate));
  permission
    .command('rm <name>')
    .alias('delete')
    .description('delete a permission (roles lose it)')
    .action(handled(permissionRm));

  const role = rbac.command('role').alias('roles').description('roles: groups of permissions');
  role
    .command('ls')
    .alias('list')
    .description('list roles')
    .option('--json', 'print JSON')
    .action(handled(roleLs));
  role
    .command('show <name>')
    .description('show a role: its permissions, their rules, and who has it')
    .option('--json', 'print JSON')
    .action(handled(roleShow));
  const roleOptions = (c: Command): Command =>
    c
      .option('--permission <name>', 'a permission of the role (repeatable)', collect, [])
      .option('--description <text>', 'what the role is for')
      .option('--json', 'print JSON');
  roleOptions(role.command('create <name>').description('create a role from permissions')).action(
    handled(roleCreate),
  );
  roleOptions(
    role
      .command('update <name>')
      .description("replace a role's permissions and/or change its description"),
  ).action(handled(roleUpdate));
  role
    .command('rm <name>')
    .alias('delete')
    .description('delete a role (and its assignments)')
    .action(handled(roleRm));

  rbac
    .command('assign <role>')
    .description(
      'assign a role to a principal, a verified email or an OIDC group (prints the assignment ID)',
    )
    .option('--subject <subject>', 'a principal, e.g. user:00u1abcd or svc:ci')
    .option('--email <email>', 'a verified email')
    .option('--group <group>', 'an OIDC group')
    .option('--json', 'print JSON')
    .action(handled(assign));
  rbac
    .command('revoke <assignment-id>')
    .description('remove a role assignment (see `statehouse rbac assignments`)')
    .action(handled(revoke));
  rbac
    .command('assignments')
    .description('list role assignments, all or for one subject, email or group')
    .option('--subject <subject>', "only this principal's")
    .option('--email <email>', "only this email's")
    .option('--group <group>', "only this group's")
    .option('--json', 'print JSON')
    .action(handled(assignments));
  rbac
    .command('test <action> <unit>')
    .description(
      'would this subject be allowed ACTION on UNIT? Prints allow or deny and the deciding rule (exit 0 allow, 4 deny); UNIT is * for rbac.manage, token.manage, audit.read',
    )
    .option('--subject <subject>', 'the principal, e.g. user:00u1abcd or svc:ci')
    .option('--email <email>', 'its verified email')
    .option('--group <group>', 'one of its OIDC groups (repeatable)', collect, [])
    .option('-w, --workspace <workspace>', 'the workspace (default: none named)')
    .option('--json', 'print JSON')
    .action(handled(test));
}
