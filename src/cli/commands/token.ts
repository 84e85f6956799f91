import type { Command } from 'commander';
import type { ApiToken, CreatedApiToken } from '../api-types';
import { UsageError } from '../errors';
import { note, out, printJson, table, when } from '../output';
import { handled } from '../run';
import { clientFor } from '../session';

interface CreateOptions {
  subject?: string;
  expires?: string;
  json?: boolean;
}

async function create(name: string, opts: CreateOptions, cmd: Command): Promise<void> {
  let expiresAt: string | undefined;
  if (opts.expires !== undefined) {
    const at = new Date(opts.expires);
    if (Number.isNaN(at.getTime())) {
      throw new UsageError(`--expires must be an ISO 8601 date, not ${opts.expires}`);
    }
    expiresAt = at.toISOString();
  }
  const created = await clientFor(cmd).json<CreatedApiToken>('POST', '/v1/auth/tokens', {
    json: { name, ...(opts.subject ? { subject: opts.subject } : {}), expiresAt },
  });
  if (opts.json) {
    printJson(created);
    return;
  }
  note(
    `Created token ${created.id} "${created.name}" for ${created.subject}` +
      `${created.expiresAt ? `, expiring ${when(created.expiresAt)}` : ''}. ` +
      'The secret below is shown only once:',
  );
  out(created.token);
}

async function list(opts: { json?: boolean }, cmd: Command): Promise<void> {
  const tokens = await clientFor(cmd).json<ApiToken[]>('GET', '/v1/auth/tokens');
  if (opts.json) {
    printJson(tokens);
    return;
  }
  if (tokens.length === 0) {
    note('No API tokens.');
    return;
  }
  out(
    table(
      ['ID', 'NAME', 'SUBJECT', 'CREATED', 'EXPIRES', 'LAST USED', 'REVOKED'],
      tokens.map((t) => [
        t.id,
        t.name,
        t.subject,
        when(t.createdAt),
        when(t.expiresAt),
        when(t.lastUsedAt),
        when(t.revokedAt),
      ]),
    ),
  );
}

async function revoke(id: string, _opts: object, cmd: Command): Promise<void> {
  await clientFor(cmd).call('DELETE', `/v1/auth/tokens/${encodeURIComponent(id)}`);
  note(`Revoked token ${id}.`);
}

export function registerTokenCommands(program: Command): void {
  const token = program.command('token').description('API tokens for machines and automation');
  token
    .command('create <name>')
    .description('create an API token (prints the secret once, on stdout)')
    .option('--subject <subject>', 'act as a service principal, e.g. svc:ci-network')
    .option('--expires <date>', 'expiry, ISO 8601 (default: never)')
    .option('--json', 'print JSON (including the secret)')
    .action(handled(create));
  token
    .command('list')
    .alias('ls')
    .description('list API tokens (never their secrets)')
    .option('--json', 'print JSON')
    .action(handled(list));
  token.command('revoke <id>').description('revoke an API token').action(handled(revoke));
}
