import type { Command } from 'commander';
import type { Page, Unit, UnitDetail, Version, WriteResult } from '../api-types';
import type { ApiClient } from '../client';
import { UsageError } from '../errors';
import { bytes, note, orDash, out, printJson, table, when } from '../output';
import { handled } from '../run';
import { clientFor } from '../session';
import { fileBody, saveBody } from '../transfer';

/** `/v1/units/<name>` with the name URL-encoded (`team-a%2Fnetwork%2Fprod`). */
export function unitPath(name: string, rest = ''): string {
  return `/v1/units/${encodeURIComponent(name)}${rest}`;
}

/** Every page of a cursor-paginated listing. */
async function allPages<T>(
  client: ApiClient,
  path: string,
  query: Record<string, string | undefined>,
): Promise<T[]> {
  const items: T[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.json<Page<T>>('GET', path, {
      query: { ...query, limit: 1000, cursor },
    });
    items.push(...page.items);
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  return items;
}

function describeVersion(v: Version): string {
  const parts = [`version ${v.version}`];
  if (v.serial !== null && v.serial !== undefined) parts.push(`serial ${v.serial}`);
  if (v.encrypted) parts.push('encrypted');
  parts.push(bytes(v.size));
  return parts.join(', ');
}

function parseVersion(raw: string): number {
  if (!/^[1-9][0-9]*$/.test(raw)) {
    throw new UsageError(`VERSION must be a version number (1, 2, 3 …), not ${raw}`);
  }
  return Number(raw);
}

interface JsonOption {
  json?: boolean;
}
interface WorkspaceOption {
  workspace: string;
}

async function ls(opts: JsonOption & { prefix?: string }, cmd: Command): Promise<void> {
  const units = await allPages<Unit>(clientFor(cmd), '/v1/units', { prefix: opts.prefix });
  if (opts.json) {
    printJson(units);
    return;
  }
  if (units.length === 0) {
    note(opts.prefix ? `No units start with ${opts.prefix}.` : 'No units.');
    return;
  }
  out(
    table(
      ['NAME', 'CREATED', 'CREATED BY'],
      units.map((u) => [u.name, when(u.createdAt), u.createdBy]),
    ),
  );
}

async function create(name: string, opts: JsonOption, cmd: Command): Promise<void> {
  const unit = await clientFor(cmd).json<Unit>('POST', '/v1/units', { json: { name } });
  if (opts.json) printJson(unit);
  else note(`Created unit ${unit.name}.`);
}

async function show(name: string, opts: JsonOption, cmd: Command): Promise<void> {
  const unit = await clientFor(cmd).json<UnitDetail>('GET', unitPath(name));
  if (opts.json) {
    printJson(unit);
    return;
  }
  const head = [
    `name:       ${unit.name}`,
    `created:    ${when(unit.createdAt)} by ${unit.createdBy}`,
  ];
  if (unit.deletedAt) head.push(`deleted:    ${when(unit.deletedAt)}`);
  out(
    `${head.join('\n')}\n\n${table(
      ['WORKSPACE', 'VERSION', 'SERIAL', 'SIZE', 'UPDATED', 'LOCKED', 'DELETED'],
      unit.workspaces.map((w) => [
        w.workspace,
        orDash(w.currentVersion),
        orDash(w.serial),
        bytes(w.size),
        when(w.updatedAt),
        w.locked ? 'yes' : 'no',
        w.deleted ? 'yes' : 'no',
      ]),
    )}`,
  );
}

async function rm(name: string, _opts: object, cmd: Command): Promise<void> {
  await clientFor(cmd).call('DELETE', unitPath(name));
  note(`Deleted unit ${name} (its versions stay restorable until purged).`);
}

async function pull(
  name: string,
  opts: WorkspaceOption & { out?: string },
  cmd: Command,
): Promise<void> {
  const res = await clientFor(cmd).send('GET', unitPath(name, '/state'), {
    query: { workspace: opts.workspace },
  });
  const size = await saveBody(res, opts.out);
  if (opts.out !== undefined && opts.out !== '-') {
    const version = res.headers.get('x-statehouse-version');
    note(
      `Wrote ${name} (${opts.workspace})${version ? ` version ${version}` : ''}, ${bytes(size)}, to ${opts.out}.`,
    );
  }
}

async function push(
  name: string,
  file: string,
  opts: WorkspaceOption & JsonOption & { lockId?: string },
  cmd: Command,
): Promise<void> {
  const body = fileBody(file);
  const result = await clientFor(cmd).json<WriteResult>('PUT', unitPath(name, '/state'), {
    query: { workspace: opts.workspace, lock_id: opts.lockId },
    body,
  });
  if (opts.json) {
    printJson(result);
    return;
  }
  note(
    result.created
      ? `Pushed ${name} (${opts.workspace}): ${describeVersion(result.version)}.`
      : `Unchanged: ${name} (${opts.workspace}) already is ${describeVersion(result.version)}.`,
  );
}

async function versions(name: string, opts: WorkspaceOption & JsonOption, cmd: Command) {
  const items = await allPages<Version>(clientFor(cmd), unitPath(name, '/versions'), {
    workspace: opts.workspace,
  });
  if (opts.json) {
    printJson(items);
    return;
  }
  if (items.length === 0) {
    note(`${name} (${opts.workspace}) has no versions.`);
    return;
  }
  out(
    table(
      ['VERSION', 'SERIAL', 'SIZE', 'SHA256', 'CREATED', 'BY', 'DOOR', 'NOTE'],
      items.map((v) => [
        String(v.version),
        v.encrypted ? 'encrypted' : orDash(v.serial),
        bytes(v.size),
        v.sha256.slice(0, 12),
        when(v.createdAt),
        v.createdBy,
        v.door,
        v.restoredFrom ? `restore of ${v.restoredFrom}` : '',
      ]),
    ),
  );
}

async function restore(
  name: string,
  rawVersion: string,
  opts: WorkspaceOption & JsonOption & { lockId?: string },
  cmd: Command,
): Promise<void> {
  const version = parseVersion(rawVersion);
  const result = await clientFor(cmd).json<WriteResult>(
    'POST',
    unitPath(name, `/versions/${version}/restore`),
    { query: { workspace: opts.workspace, lock_id: opts.lockId } },
  );
  if (opts.json) {
    printJson(result);
    return;
  }
  note(
    result.created
      ? `Restored version ${version} of ${name} (${opts.workspace}) as ${describeVersion(result.version)}.`
      : `Unchanged: ${name} (${opts.workspace}) already has the content of version ${version}.`,
  );
}

export function registerUnitCommands(program: Command): Command {
  const unit = program.command('unit').description('units (Terraform states) and their versions');
  const ws = ['-w, --workspace <workspace>', 'workspace', 'default'] as const;
  unit
    .command('ls')
    .description('list the units you may read')
    .option('--prefix <prefix>', 'only names starting with this')
    .option('--json', 'print JSON')
    .action(handled(ls));
  unit
    .command('create <name>')
    .description('create a unit (its default workspace exists at once)')
    .option('--json', 'print JSON')
    .action(handled(create));
  unit
    .command('show <name>')
    .description('show a unit and its workspaces')
    .option('--json', 'print JSON')
    .action(handled(show));
  unit
    .command('rm <name>')
    .description('delete a unit (soft: versions stay restorable until purged)')
    .action(handled(rm));
  unit
    .command('pull <name>')
    .description('download the current state, byte for byte')
    .option(...ws)
    .option('-o, --out <file>', 'write to this file instead of stdout')
    .action(handled(pull));
  unit
    .command('push <name> <file>')
    .description('upload a state file as a new version ("-" reads stdin)')
    .option(...ws)
    .option('--lock-id <id>', 'the ID of the lock you hold on the state')
    .option('--json', 'print JSON')
    .action(handled(push));
  unit
    .command('versions <name>')
    .description('list versions, newest first')
    .option(...ws)
    .option('--json', 'print JSON')
    .action(handled(versions));
  unit
    .command('restore <name> <version>')
    .description('make an old version current again (as a new version with the same bytes)')
    .option(...ws)
    .option('--lock-id <id>', 'the ID of the lock you hold on the state')
    .option('--json', 'print JSON')
    .action(handled(restore));
  return unit;
}
