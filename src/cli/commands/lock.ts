import type { Command } from 'commander';
import { hostname, userInfo } from 'node:os';
import type { ForceUnlockResult, Lock } from '../api-types';
import { UsageError } from '../errors';
import { age, note, out, printJson, table } from '../output';
import { handled } from '../run';
import { clientFor } from '../session';
import { unitPath } from './unit';

interface JsonOption {
  json?: boolean;
}
interface WorkspaceOption {
  workspace: string;
}

function who(): string {
  let user = 'unknown';
  try {
    user = userInfo().username;
  } catch {
    // no passwd entry (containers): keep "unknown"
  }
  return `${user}@${hostname()}`;
}

/** The LockInfo to send: Terraform's fields filled in, overridden by `--info`. */
function lockInfo(raw: string | undefined): Record<string, unknown> {
  let given: Record<string, unknown> = {};
  if (raw !== undefined) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      throw new UsageError('--info must be a JSON object (a Terraform LockInfo)');
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw new UsageError('--info must be a JSON object (a Terraform LockInfo)');
    }
    given = parsed as Record<string, unknown>;
  }
  return {
    Operation: 'statehouse lock acquire',
    Info: '',
    Who: who(),
    Version: '',
    Created: new Date().toISOString(),
    ...given,
  };
}

function holder(lock: Lock): string {
  const parts = [lock.principal];
  if (typeof lock.info.Who === 'string' && lock.info.Who) parts.push(`(${lock.info.Who})`);
  return parts.join(' ');
}

async function ls(opts: JsonOption, cmd: Command): Promise<void> {
  const locks = await clientFor(cmd).json<Lock[]>('GET', '/v1/locks');
  if (opts.json) {
    printJson(locks);
    return;
  }
  if (locks.length === 0) {
    note('No locks are held.');
    return;
  }
  out(
    table(
      ['UNIT', 'WORKSPACE', 'ID', 'HOLDER', 'WHO', 'OPERATION', 'AGE'],
      locks.map((l) => [
        l.unit,
        l.workspace,
        l.id,
        l.principal,
        typeof l.info.Who === 'string' && l.info.Who ? l.info.Who : '-',
        typeof l.info.Operation === 'string' && l.info.Operation ? l.info.Operation : '-',
        age(l.ageSeconds),
      ]),
    ),
  );
}

async function acquire(
  name: string,
  opts: WorkspaceOption & JsonOption & { info?: string },
  cmd: Command,
): Promise<void> {
  const info = lockInfo(opts.info);
  const lock = await clientFor(cmd).json<Lock>('POST', unitPath(name, '/lock'), {
    query: { workspace: opts.workspace },
    json: info,
  });
  if (opts.json) {
    printJson(lock);
    return;
  }
  note(`Locked ${lock.unit} (${lock.workspace}). Release it with:`);
  note(`  statehouse lock release ${lock.unit} -w ${lock.workspace} --id ${lock.id}`);
  out(lock.id);
}

async function release(
  name: string,
  opts: WorkspaceOption & { id: string },
  cmd: Command,
): Promise<void> {
  await clientFor(cmd).call('DELETE', unitPath(name, '/lock'), {
    query: { workspace: opts.workspace, id: opts.id },
  });
  note(`Released lock ${opts.id} on ${name} (${opts.workspace}).`);
}

async function forceUnlock(
  name: string,
  opts: WorkspaceOption & JsonOption,
  cmd: Command,
): Promise<void> {
  const result = await clientFor(cmd).json<ForceUnlockResult>(
    'POST',
    unitPath(name, '/force-unlock'),
    { query: { workspace: opts.workspace } },
  );
  if (opts.json) {
    printJson(result);
    return;
  }
  note(
    result.released && result.lock
      ? `Removed lock ${result.lock.id} on ${name} (${opts.workspace}), held by ${holder(result.lock)}.`
      : `${name} (${opts.workspace}) was not locked.`,
  );
}

export function registerLockCommands(program: Command): void {
  const lock = program.command('lock').description('state locks (the ones Terraform sees)');
  const ws = ['-w, --workspace <workspace>', 'workspace', 'default'] as const;
  lock
    .command('ls')
    .description('list held locks you may see')
    .option('--json', 'print JSON')
    .action(handled(ls));
  lock
    .command('acquire <name>')
    .description('take the lock on a state (prints the lock ID on stdout)')
    .option(...ws)
    .option('--info <json>', 'Terraform LockInfo fields, as a JSON object (ID, Operation, Who …)')
    .option('--json', 'print JSON')
    .action(handled(acquire));
  lock
    .command('release <name>')
    .description('release a lock you hold')
    .option(...ws)
    .requiredOption('--id <id>', 'the lock ID')
    .action(handled(release));
  lock
    .command('force-unlock <name>')
    .description('remove whatever lock is held (needs unit.force-unlock; audited)')
    .option(...ws)
    .option('--json', 'print JSON')
    .action(handled(forceUnlock));
}
