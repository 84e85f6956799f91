import type { Command } from 'commander';
import { UsageError } from '../errors';
import { note, orDash, out, printJson, table, when } from '../output';
import { handled } from '../run';
import { clientFor } from '../session';

/** One security event of `GET /v1/audit`. */
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

interface AuditPage {
  items: AuditEvent[];
  nextCursor: string | null;
}

interface AuditOptions {
  principal?: string;
  resource?: string;
  action?: string;
  type?: string;
  since?: string;
  until?: string;
  limit?: string;
  cursor?: string;
  all?: boolean;
  json?: boolean;
}

/** The server's largest page. */
const PAGE = 1000;
const DEFAULT_LIMIT = 100;

function isoDate(raw: string | undefined, option: string): string | undefined {
  if (raw === undefined) return undefined;
  const d = new Date(raw);
  if (raw.trim() === '' || Number.isNaN(d.getTime())) {
    throw new UsageError(`${option} must be an ISO 8601 date or time, not ${raw}`);
  }
  return d.toISOString();
}

function details(e: AuditEvent): string {
  const parts = Object.entries(e.details ?? {})
    .filter(([, v]) => v !== null && v !== undefined && v !== '')
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`);
  if (e.count > 1) parts.push(`(×${e.count})`);
  return parts.join(' ');
}

function resourceOf(e: AuditEvent): string {
  if (!e.resource) return '-';
  return e.workspace ? `${e.resource} (${e.workspace})` : e.resource;
}

async function audit(opts: AuditOptions, cmd: Command): Promise<void> {
  let limit = DEFAULT_LIMIT;
  if (opts.limit !== undefined) {
    if (!/^[1-9][0-9]{0,8}$/.test(opts.limit)) {
      throw new UsageError(`--limit must be a positive number of events, not ${opts.limit}`);
    }
    limit = Number(opts.limit);
  }
  if (opts.all && opts.limit !== undefined) {
    throw new UsageError('--all and --limit do not go together');
  }
  if (opts.cursor !== undefined && !/^\d{1,20}$/.test(opts.cursor)) {
    throw new UsageError(`--cursor must be a cursor this command printed, not ${opts.cursor}`);
  }
  const since = isoDate(opts.since, '--since');
  const until = isoDate(opts.until, '--until');
  if (since && until && since >= until) throw new UsageError('--since must be before --until');

  const client = clientFor(cmd);
  const items: AuditEvent[] = [];
  let cursor = opts.cursor;
  let more: string | null = null;
  for (;;) {
    const want = opts.all ? PAGE : Math.min(PAGE, limit - items.length);
    const page = await client.json<AuditPage>('GET', '/v1/audit', {
      query: {
        principal: opts.principal,
        resource: opts.resource,
        action: opts.action,
        type: opts.type,
        since,
        until,
        limit: want,
        cursor,
      },
    });
    items.push(...page.items);
    more = page.nextCursor ?? null;
    if (!more || (!opts.all && items.length >= limit)) break;
    cursor = more;
  }

  if (opts.json) {
    printJson(items);
  } else if (items.length === 0) {
    note('No matching events.');
  } else {
    out(
      table(
        ['TIME', 'TYPE', 'PRINCIPAL', 'ACTION', 'RESOURCE', 'DECISION', 'DOOR', 'DETAILS'],
        items.map((e) => [
          when(e.at),
          e.type,
          e.principal,
          orDash(e.action),
          resourceOf(e),
          e.decision,
          orDash(e.door),
          details(e),
        ]),
      ),
    );
  }
  if (more && !opts.all) {
    note(`More events: add --cursor ${more} for the next ${limit}, or --all for every one.`);
  }
}

export function registerAuditCommands(program: Command): void {
  program
    .command('audit')
    .description('security events, newest first (needs audit.read)')
    .option(
      '--principal <subject>',
      'only this principal (user:…, svc:…, bootstrap-admin, anonymous)',
    )
    .option('--resource <unit>', 'only events about this unit')
    .option('--action <action>', 'only this action, e.g. unit.write or rbac.manage')
    .option(
      '--type <type>',
      'only this event type, e.g. rbac.change, authz.denied, lock.force_unlock',
    )
    .option('--since <time>', 'from this time (ISO 8601, inclusive)')
    .option('--until <time>', 'until this time (ISO 8601, exclusive)')
    .option('--limit <n>', `at most this many events (default ${DEFAULT_LIMIT})`)
    .option('--all', 'every matching event (follows every page)')
    .option('--cursor <cursor>', 'continue where an earlier listing stopped')
    .option('--json', 'print the events as a JSON array')
    .action(handled(audit));
}
