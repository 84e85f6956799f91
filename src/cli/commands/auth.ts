import type { Command } from 'commander';
import type { Me, ProcessCredentials } from '../api-types';
import { ApiClient, ApiError } from '../client';
import { CredentialStore } from '../credentials';
import { credsCachePath, CredsCache, isProcessCredentials } from '../creds-cache';
import { CliError, UsageError } from '../errors';
import { browserLogin } from '../login';
import { note, out, printJson } from '../output';
import { handled } from '../run';
import { clientFor, GivenTokenAuth, loginFromTokenResponse, serverOf } from '../session';

function describeMe(me: Me): string {
  return `${me.subject}${me.email ? ` (${me.email})` : ''}`;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8').trim();
}

interface LoginOptions {
  browser: boolean;
  token?: string;
  timeout: string;
}

async function login(opts: LoginOptions, cmd: Command): Promise<void> {
  const server = serverOf(cmd);
  const store = new CredentialStore();
  // S3 credentials cached for the login being replaced are not handed out for the new one.
  new CredsCache().clear();
  if (opts.token !== undefined) {
    const token = opts.token === '-' ? await readStdin() : opts.token.trim();
    if (!token) throw new UsageError('--token needs a token (or "-" to read it from stdin)');
    let me: Me;
    try {
      me = await new ApiClient(server, new GivenTokenAuth(token)).json<Me>('GET', '/v1/auth/me', {
        timeoutMs: 30_000,
      });
    } catch (e) {
      if (e instanceof ApiError) throw new CliError(`the server refused the token: ${e.message}`);
      throw e;
    }
    await store.set(server, { type: 'token', token });
    note(`Logged in to ${server} as ${describeMe(me)} with a token.`);
    return;
  }
  const seconds = Number(opts.timeout);
  if (!Number.isFinite(seconds) || seconds <= 0) {
    throw new UsageError(`--timeout must be a number of seconds, not ${opts.timeout}`);
  }
  const tokens = await browserLogin(server, {
    openBrowser: opts.browser,
    timeoutMs: seconds * 1000,
    log: note,
  });
  const entry = loginFromTokenResponse(tokens);
  await store.set(server, entry);
  const me = await new ApiClient(server, new GivenTokenAuth(entry.access_token)).json<Me>(
    'GET',
    '/v1/auth/me',
    { timeoutMs: 30_000 },
  );
  note(`Logged in to ${server} as ${describeMe(me)}.`);
}

async function logout(cmd: Command): Promise<void> {
  const server = serverOf(cmd);
  const store = new CredentialStore();
  // Whatever it was logged in with: after a logout no cached S3 credentials are handed out.
  new CredsCache().clear();
  const entry = store.get(server);
  if (!entry) {
    note(`Not logged in to ${server}.`);
    return;
  }
  let failure: unknown;
  if (entry.type === 'login') {
    try {
      await new ApiClient(server).call('POST', '/v1/auth/logout', {
        auth: false,
        json: { refresh_token: entry.refresh_token },
        timeoutMs: 30_000,
      });
    } catch (e) {
      failure = e;
    }
  }
  await store.set(server, undefined);
  if (failure !== undefined) {
    throw new CliError(
      `removed the stored login for ${server}, but the server did not end the session: ${(failure as Error).message}`,
    );
  }
  note(
    entry.type === 'login'
      ? `Logged out of ${server}.`
      : `Removed the stored token for ${server} (it stays valid until revoked: \`statehouse token revoke ID\`).`,
  );
}

async function whoami(opts: { json?: boolean }, cmd: Command): Promise<void> {
  const client = clientFor(cmd);
  const me = await client.json<Me>('GET', '/v1/auth/me');
  if (opts.json) {
    printJson(me);
    return;
  }
  const rows: [string, string][] = [
    ['subject', me.subject],
    ['kind', me.kind],
    ['via', me.via],
  ];
  if (me.email) rows.push(['email', me.email]);
  if (me.groups && me.groups.length > 0) rows.push(['groups', me.groups.join(', ')]);
  rows.push(['server', client.server]);
  out(rows.map(([k, v]) => `${`${k}:`.padEnd(9)}${v}`).join('\n'));
}

async function creds(opts: { json?: boolean; env?: boolean }, cmd: Command): Promise<void> {
  if (opts.json === opts.env) {
    throw new UsageError(
      opts.json
        ? 'choose one of --json and --env'
        : '`statehouse creds` prints S3 credentials: `statehouse creds --json` for AWS credential_process, `statehouse creds --env` for shell exports',
    );
  }
  const store = new CredentialStore();
  const client = clientFor(cmd, store);
  const cache = new CredsCache(credsCachePath(), store);
  const { Version, AccessKeyId, SecretAccessKey, SessionToken, Expiration } =
    cache.get(client.server) ?? (await issueCreds(client, cache));
  if (opts.json) {
    printJson({ Version, AccessKeyId, SecretAccessKey, SessionToken, Expiration });
    return;
  }
  out(envExports({ AccessKeyId, SecretAccessKey, SessionToken, Expiration }));
}

/** New credentials from the server, remembered in the cache for the next calls. */
async function issueCreds(client: ApiClient, cache: CredsCache): Promise<ProcessCredentials> {
  const answer = await client.json<unknown>('POST', '/v1/auth/issue-s3-creds');
  if (!isProcessCredentials(answer)) {
    throw new CliError('the server answered with something that is not process credentials');
  }
  const { Version, AccessKeyId, SecretAccessKey, SessionToken, Expiration } = answer;
  const creds = { Version, AccessKeyId, SecretAccessKey, SessionToken, Expiration };
  // Keyed by the source as it is now: a login refreshed for this issue is stored under the
  // refreshed refresh token, where the next call looks.
  cache.put(client.server, creds);
  return creds;
}

/**
 * Credentials as shell exports, for clients without `credential_process` (s3cmd reads the
 * AWS_* variables): `eval "$(statehouse creds --env)"`. They expire: the first line says when,
 * as a comment, so it survives `> file` and `eval` alike; AWS_CREDENTIAL_EXPIRATION carries it
 * for the SDKs that read it.
 */
function envExports(c: Omit<ProcessCredentials, 'Version'>): string {
  return [
    `# Statehouse S3 credentials, valid until ${c.Expiration}: run \`statehouse creds --env\` again for new ones after that`,
    `export AWS_ACCESS_KEY_ID=${shellWord(c.AccessKeyId)}`,
    `export AWS_SECRET_ACCESS_KEY=${shellWord(c.SecretAccessKey)}`,
    `export AWS_SESSION_TOKEN=${shellWord(c.SessionToken)}`,
    `export AWS_CREDENTIAL_EXPIRATION=${shellWord(c.Expiration)}`,
  ].join('\n');
}

/** A value as one shell word: bare when it holds only safe characters, else single-quoted. */
function shellWord(value: string): string {
  return /^[A-Za-z0-9._:+/=-]+$/.test(value) ? value : `'${value.replace(/'/g, `'\\''`)}'`;
}

export function registerAuthCommands(program: Command): void {
  program
    .command('login')
    .description(
      'log in through the OpenID provider in a browser (authorization code + PKCE), or store a token',
    )
    .option('--no-browser', 'do not open a browser; only print the address to open')
    .option('--token <token>', 'store this token (an API token) instead; "-" reads it from stdin')
    .option('--timeout <seconds>', 'give up when the browser login has not finished by then', '300')
    .action(handled(login));

  program
    .command('logout')
    .description('end the login session on the server and forget the stored credentials')
    .action(handled((_opts: object, cmd: Command) => logout(cmd)));

  program
    .command('whoami')
    .description('show who the server takes you for')
    .option('--json', 'print JSON')
    .action(handled(whoami));

  program
    .command('creds')
    .description(
      'print short-lived S3 credentials (refreshing the login first): AWS credential_process JSON, or shell exports',
    )
    .option('--json', 'print the process-credentials JSON (for credential_process)')
    .option(
      '--env',
      'print `export AWS_ACCESS_KEY_ID=…` lines (for `eval`; clients without credential_process, like s3cmd)',
    )
    .action(handled(creds));
}
