import { ChildProcess, spawn } from 'node:child_process';
import { freePort } from '../support/ports';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freshServerEnv } from '../support/database';
import { startOidcProvider, TestOidcProvider } from '../support/oidc';
import { FormBrowser } from '../support/form-browser';
import { CLI, TEST_TOKEN } from '../support/paths';
import { NODE, RunningServer, spawnServer } from '../support/server';

/**
 * The `statehouse` CLI as a user runs it: a child process with its own HOME, against a real
 * server and a real OpenID provider (`oidc-provider` in its own process). The browser is
 * played by `fetch` with a hand-kept cookie jar, through the provider's real login and
 * consent pages.
 */

interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  stdoutBytes: Buffer;
}

interface RunningCli {
  proc: ChildProcess;
  stderr: () => string;
  done: Promise<CliResult>;
}

function cliEnv(env: Record<string, string>): Record<string, string> {
  const base: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !k.startsWith('STATEHOUSE_') && k !== 'DATABASE_URL') base[k] = v;
  }
  return { ...base, NODE_ENV: 'production', ...env };
}

function startCli(args: string[], env: Record<string, string>, stdin?: string): RunningCli {
  const proc = spawn(NODE, [CLI, ...args], {
    env: cliEnv(env),
    stdio: [stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  });
  if (stdin !== undefined) proc.stdin?.end(stdin);
  const out: Buffer[] = [];
  let err = '';
  proc.stdout?.on('data', (d: Buffer) => out.push(d));
  proc.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  const done = new Promise<CliResult>((resolve) =>
    proc.once('close', (code) => {
      const stdoutBytes = Buffer.concat(out);
      resolve({ code, stdout: stdoutBytes.toString('utf8'), stderr: err, stdoutBytes });
    }),
  );
  return { proc, stderr: () => err, done };
}

function cli(args: string[], env: Record<string, string>, stdin?: string): Promise<CliResult> {
  return startCli(args, env, stdin).done;
}

async function waitFor<T>(what: string, probe: () => T | undefined, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The authorization URL the CLI prints on stderr. */
async function authorizationUrl(run: RunningCli, issuer: string): Promise<URL> {
  const line = await waitFor('the authorization URL on stderr', () => {
    if (run.proc.exitCode !== null) throw new Error(`login exited early:\n${run.stderr()}`);
    return run
      .stderr()
      .split('\n')
      .map((l) => l.trim())
      .find((l) => l.startsWith(`${issuer}/`));
  });
  return new URL(line);
}

/** A Terraform v4 state with bytes that a re-serialising client would change. */
function stateBytes(serial: number, lineage: string, padding = ''): Buffer {
  return Buffer.from(
    `{\n    "version": 4,\n  "terraform_version": "1.11.0",\n  "serial": ${serial},\n` +
      `  "lineage": "${lineage}",\n  "outputs": {"greeting": {"value": "héllo ✓ ${serial}${padding}", "type": "string"}},\n` +
      `  "resources": [],\n  "check_results": null\n}\n\n`,
    'utf8',
  );
}

describe('the statehouse CLI', () => {
  let provider: TestOidcProvider;
  let server: RunningServer;
  let cleanup: () => Promise<void>;
  const temps: string[] = [];

  function tempDir(): string {
    const dir = mkdtempSync(join(tmpdir(), 'statehouse-cli-'));
    temps.push(dir);
    return dir;
  }

  /** A user's environment: its own HOME and XDG_CONFIG_HOME, pointed at the server. */
  function userEnv(extra: Record<string, string> = {}): {
    env: Record<string, string>;
    credentialsFile: string;
  } {
    const home = tempDir();
    return {
      env: {
        HOME: home,
        XDG_CONFIG_HOME: join(home, 'xdg'),
        STATEHOUSE_SERVER: server.url,
        ...extra,
      },
      credentialsFile: join(home, 'xdg', 'statehouse', 'credentials.json'),
    };
  }

  const admin = (): Record<string, string> => ({ ...userEnv().env, STATEHOUSE_TOKEN: TEST_TOKEN });

  function readCredentials(file: string): { servers: Record<string, Record<string, string>> } {
    return JSON.parse(readFileSync(file, 'utf8'));
  }

  /** `statehouse login --no-browser` through the provider's pages as `login`. */
  async function browserLogin(
    env: Record<string, string>,
    login: string,
  ): Promise<{ result: CliResult; authUrl: URL; page: Response }> {
    const run = startCli(['login', '--no-browser'], env);
    const authUrl = await authorizationUrl(run, provider.issuer);
    const callback = await new FormBrowser().authorize(authUrl, login);
    const page = await fetch(callback);
    const result = await run.done;
    return { result, authUrl, page };
  }

  beforeAll(async () => {
    provider = await startOidcProvider();
    const fresh = await freshServerEnv();
    cleanup = fresh.cleanup;
    server = await spawnServer({
      ...fresh.env,
      STATEHOUSE_OIDC_ISSUER: provider.issuer,
      STATEHOUSE_OIDC_CLIENT_ID: 'statehouse-cli',
      STATEHOUSE_OIDC_SCOPES: 'openid email profile groups',
    });
  });

  afterAll(async () => {
    await server?.stop();
    await provider?.stop();
    await cleanup?.();
    for (const d of temps) rmSync(d, { recursive: true, force: true });
  });

  describe('browser login (authorization code + PKCE through a loopback redirect)', () => {
    let user: ReturnType<typeof userEnv>;

    beforeAll(() => {
      user = userEnv();
    });

    it('logs in through the provider and stores the tokens in a 0600 file in a 0700 directory', async () => {
      const { result, authUrl, page } = await browserLogin(user.env, 'alice');
      expect(result.stderr).not.toContain('statehouse:');
      expect(result.code).toBe(0);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('logged in');

      // The request the CLI sent to the provider: a public client with PKCE S256.
      const q = authUrl.searchParams;
      expect(q.get('client_id')).toBe('statehouse-cli');
      expect(q.get('response_type')).toBe('code');
      expect(q.get('code_challenge_method')).toBe('S256');
      expect(q.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(q.get('state')?.length).toBeGreaterThanOrEqual(32);
      expect(q.get('nonce')?.length).toBeGreaterThanOrEqual(32);
      expect(q.get('scope')?.split(' ')).toEqual(
        expect.arrayContaining(['openid', 'email', 'groups']),
      );
      expect(q.get('redirect_uri')).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/callback$/);

      expect(statSync(user.credentialsFile).mode & 0o777).toBe(0o600);
      expect(statSync(join(user.env.XDG_CONFIG_HOME, 'statehouse')).mode & 0o777).toBe(0o700);
      const entry = readCredentials(user.credentialsFile).servers[server.url];
      expect(entry.type).toBe('login');
      expect(entry.refresh_token).toMatch(/^shr_/);
      expect(Date.parse(entry.expires_at)).toBeGreaterThan(Date.now());
      // Secrets are stored, never printed.
      expect(result.stdout + result.stderr).not.toContain(entry.access_token);
      expect(result.stdout + result.stderr).not.toContain(entry.refresh_token);
      expect(result.stderr).toContain('user:alice');
    });

    it('whoami shows the user with the verified email and the groups from the provider', async () => {
      const r = await cli(['whoami'], user.env);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/subject:\s+user:alice\n/);
      expect(r.stdout).toMatch(/email:\s+alice@example\.com\n/);
      expect(r.stdout).toMatch(/groups:\s+platform, alice-group\n/);
      expect(r.stdout).toMatch(/via:\s+access-token\n/);
      const json = await cli(['whoami', '--json'], user.env);
      expect(JSON.parse(json.stdout)).toMatchObject({
        subject: 'user:alice',
        email: 'alice@example.com',
        groups: ['platform', 'alice-group'],
      });
    });

    it('creds --json prints the process-credentials JSON and nothing else on stdout', async () => {
      const r = await cli(['creds', '--json'], user.env);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      const creds = JSON.parse(r.stdout);
      expect(Object.keys(creds).sort()).toEqual(
        ['AccessKeyId', 'Expiration', 'SecretAccessKey', 'SessionToken', 'Version'].sort(),
      );
      expect(creds.Version).toBe(1);
      expect(creds.SessionToken.split('.')).toHaveLength(3);
      expect(Date.parse(creds.Expiration)).toBeGreaterThan(Date.now());
      const claims = JSON.parse(
        Buffer.from(creds.SessionToken.split('.')[1], 'base64url').toString(),
      );
      expect(claims.sub).toBe('user:alice');
      expect(claims.aud).toEqual(['s3']);
    });

    it('creds without --json is a usage error (exit 2)', async () => {
      const r = await cli(['creds'], user.env);
      expect(r.code).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(/^statehouse: .*--json/);
    });

    it('refreshes an expired access token first and stores the rotated pair', async () => {
      const before = readCredentials(user.credentialsFile);
      const old = before.servers[server.url];
      before.servers[server.url] = {
        ...old,
        expires_at: new Date(Date.now() - 1000).toISOString(),
      };
      writeFileSync(user.credentialsFile, JSON.stringify(before), { mode: 0o600 });

      const r = await cli(['creds', '--json'], user.env);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(JSON.parse(r.stdout).Version).toBe(1);

      const after = readCredentials(user.credentialsFile).servers[server.url];
      expect(after.refresh_token).toMatch(/^shr_/);
      expect(after.refresh_token).not.toBe(old.refresh_token);
      expect(after.access_token).not.toBe(old.access_token);
      expect(Date.parse(after.expires_at)).toBeGreaterThan(Date.now() + 30 * 60_000);
      expect(statSync(user.credentialsFile).mode & 0o777).toBe(0o600);
      // The session lives on: the rotated refresh token is the valid one.
      const who = await cli(['whoami'], user.env);
      expect(who.code).toBe(0);
    });

    it('refreshes once and retries when the server refuses a stored access token that looks valid', async () => {
      const file = readCredentials(user.credentialsFile);
      const old = file.servers[server.url];
      file.servers[server.url] = { ...old, access_token: `${old.access_token.slice(0, -4)}AAAA` };
      writeFileSync(user.credentialsFile, JSON.stringify(file), { mode: 0o600 });

      const r = await cli(['whoami'], user.env);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(r.stdout).toContain('user:alice');
      const after = readCredentials(user.credentialsFile).servers[server.url];
      expect(after.refresh_token).not.toBe(old.refresh_token);
    });

    it('concurrent creds calls that all find the token expired refresh once and all succeed', async () => {
      const file = readCredentials(user.credentialsFile);
      const old = file.servers[server.url];
      file.servers[server.url] = { ...old, expires_at: new Date(0).toISOString() };
      writeFileSync(user.credentialsFile, JSON.stringify(file), { mode: 0o600 });

      const results = await Promise.all(
        Array.from({ length: 5 }, () => cli(['creds', '--json'], user.env)),
      );
      for (const r of results) {
        expect(r.stderr).toBe('');
        expect(r.code).toBe(0);
        expect(JSON.parse(r.stdout).Version).toBe(1);
      }
      // Had two of them presented the same refresh token, the server would have ended the
      // whole session (reuse detection): it still works.
      const after = readCredentials(user.credentialsFile).servers[server.url];
      expect(after.refresh_token).not.toBe(old.refresh_token);
      file.servers[server.url] = { ...after, expires_at: new Date(0).toISOString() };
      writeFileSync(user.credentialsFile, JSON.stringify(file), { mode: 0o600 });
      expect((await cli(['whoami'], user.env)).code).toBe(0);
    });

    it('logout ends the session on the server and removes the stored login; whoami then fails', async () => {
      const refreshToken = readCredentials(user.credentialsFile).servers[server.url].refresh_token;
      const r = await cli(['logout'], user.env);
      expect(r.code).toBe(0);
      expect(readCredentials(user.credentialsFile).servers[server.url]).toBeUndefined();
      const refused = await fetch(`${server.url}/v1/auth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ refresh_token: refreshToken }),
      });
      expect(refused.status).toBe(401);

      const who = await cli(['whoami'], user.env);
      expect(who.code).toBe(1);
      expect(who.stdout).toBe('');
      expect(who.stderr).toBe(
        `statehouse: not logged in to ${server.url}: run \`statehouse login --server ${server.url}\` or set STATEHOUSE_TOKEN\n`,
      );
    });

    it('uses ~/.config/statehouse/credentials.json when XDG_CONFIG_HOME is not set', async () => {
      const home = tempDir();
      const env = { HOME: home, XDG_CONFIG_HOME: '', STATEHOUSE_SERVER: server.url };
      const { result } = await browserLogin(env, 'bob');
      expect(result.code).toBe(0);
      const file = join(home, '.config', 'statehouse', 'credentials.json');
      expect(statSync(file).mode & 0o777).toBe(0o600);
      const who = await cli(['whoami', '--json'], env);
      expect(JSON.parse(who.stdout).subject).toBe('user:bob');
    });
  });

  describe('login failures: a clear message and a non-zero exit', () => {
    it('a redirect whose state does not match this login', async () => {
      const user = userEnv();
      const run = startCli(['login', '--no-browser'], user.env);
      const authUrl = await authorizationUrl(run, provider.issuer);
      const redirect = new URL(authUrl.searchParams.get('redirect_uri') as string);
      redirect.searchParams.set('code', 'a-code-from-somewhere-else');
      redirect.searchParams.set('state', 'not-the-state-this-login-sent');
      const page = await fetch(redirect);
      expect(page.status).toBe(400);
      expect(await page.text()).toContain('state mismatch');
      const result = await run.done;
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(/^statehouse: .*state mismatch/m);
      expect(() => statSync(user.credentialsFile)).toThrow();
    });

    it('an error from the provider in the redirect', async () => {
      const user = userEnv();
      const run = startCli(['login', '--no-browser'], user.env);
      const authUrl = await authorizationUrl(run, provider.issuer);
      const redirect = new URL(authUrl.searchParams.get('redirect_uri') as string);
      redirect.searchParams.set('error', 'access_denied');
      redirect.searchParams.set('error_description', 'End-User aborted interaction');
      redirect.searchParams.set('state', authUrl.searchParams.get('state') as string);
      redirect.searchParams.set('iss', provider.issuer);
      await fetch(redirect);
      const result = await run.done;
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(
        'statehouse: the OpenID provider refused the login: access_denied (End-User aborted interaction)',
      );
    });

    it('a login that the user aborts at the provider', async () => {
      const user = userEnv();
      const run = startCli(['login', '--no-browser'], user.env);
      const authUrl = await authorizationUrl(run, provider.issuer);
      const browser = new FormBrowser();
      // Open the login page, then follow the provider's own "abort" link.
      const first = await browser.request(authUrl.toString());
      const interaction = new URL(first.headers.get('location') as string, authUrl);
      const abort = await browser.request(`${interaction.toString()}/abort`);
      let location = new URL(abort.headers.get('location') as string, interaction).toString();
      while (!location.startsWith(authUrl.searchParams.get('redirect_uri') as string)) {
        const res = await browser.request(location);
        location = new URL(res.headers.get('location') as string, location).toString();
      }
      await fetch(location);
      const result = await run.done;
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(
        /^statehouse: the OpenID provider refused the login: access_denied/m,
      );
    });

    it('no answer before the timeout', async () => {
      const user = userEnv();
      const r = await cli(['login', '--no-browser', '--timeout', '1'], user.env);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('statehouse: no login answer came back within 1 second;');
    });

    it('a server that cannot be reached', async () => {
      const port = await freePort();
      const user = userEnv();
      const r = await cli(
        ['login', '--no-browser', '--server', `http://127.0.0.1:${port}`],
        user.env,
      );
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(
        `statehouse: cannot reach the server at http://127.0.0.1:${port}: connect ECONNREFUSED 127.0.0.1:${port}\n`,
      );
      const ls = await cli(['unit', 'ls', '--server', `http://127.0.0.1:${port}`], {
        ...user.env,
        STATEHOUSE_TOKEN: TEST_TOKEN,
      });
      expect(ls.code).toBe(1);
      expect(ls.stderr).toContain(`cannot reach the server at http://127.0.0.1:${port}`);
    });

    it('a server URL that is not one is a usage error', async () => {
      const r = await cli(['whoami', '--server', 'not a url'], userEnv().env);
      expect(r.code).toBe(2);
      expect(r.stderr).toBe(
        'statehouse: not a URL: not a url (expected e.g. https://statehouse.example.com)\n',
      );
    });

    it('a token the server refuses', async () => {
      const user = userEnv();
      const r = await cli(['login', '--token', 'sht_not-a-real-token'], user.env);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/^statehouse: the server refused the token: .+\n$/);
      expect(r.stderr).not.toContain('sht_not-a-real-token');
      expect(() => statSync(user.credentialsFile)).toThrow();
    });
  });

  describe('API tokens', () => {
    it('token create prints the secret once; login --token stores it; list and revoke', async () => {
      const created = await cli(
        ['token', 'create', 'ci-network', '--subject', 'svc:ci-network'],
        admin(),
      );
      expect(created.code).toBe(0);
      const secret = created.stdout.trim();
      expect(secret).toMatch(/^sht_\S+$/);
      expect(created.stderr).toContain('shown only once');

      const user = userEnv();
      const login = await cli(['login', '--token', '-'], user.env, `${secret}\n`);
      expect(login.code).toBe(0);
      expect(login.stderr).toContain('svc:ci-network');
      expect(readCredentials(user.credentialsFile).servers[server.url]).toEqual({
        type: 'token',
        token: secret,
      });
      expect(statSync(user.credentialsFile).mode & 0o777).toBe(0o600);
      const who = await cli(['whoami', '--json'], user.env);
      expect(JSON.parse(who.stdout)).toMatchObject({ subject: 'svc:ci-network', via: 'api-token' });

      const list = await cli(['token', 'list', '--json'], admin());
      const tokens = JSON.parse(list.stdout) as { id: string; name: string; subject: string }[];
      const mine = tokens.find((t) => t.name === 'ci-network');
      expect(mine).toMatchObject({ subject: 'svc:ci-network' });
      expect(list.stdout).not.toContain(secret);
      const table = await cli(['token', 'list'], admin());
      expect(table.stdout).toMatch(
        /^ID\s+NAME\s+SUBJECT\s+CREATED\s+EXPIRES\s+LAST USED\s+REVOKED/,
      );
      expect(table.stdout).toContain(mine?.id);

      const revoke = await cli(['token', 'revoke', mine?.id as string], admin());
      expect(revoke.code).toBe(0);
      const after = await cli(['whoami'], user.env);
      expect(after.code).toBe(1);
      expect(after.stderr).toMatch(
        /^statehouse: .+ — log in again with `statehouse login --server/,
      );
    });

    it('token create with an expiry, and a bad expiry is a usage error', async () => {
      const r = await cli(
        [
          'token',
          'create',
          'short-lived',
          '--subject',
          'svc:short-lived',
          '--expires',
          '2099-01-02T03:04:05Z',
          '--json',
        ],
        admin(),
      );
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({
        name: 'short-lived',
        expiresAt: '2099-01-02T03:04:05.000Z',
      });
      const bad = await cli(['token', 'create', 'x', '--expires', 'tomorrow'], admin());
      expect(bad.code).toBe(2);
      expect(bad.stderr).toBe('statehouse: --expires must be an ISO 8601 date, not tomorrow\n');
    });

    it('STATEHOUSE_TOKEN wins over the stored login', async () => {
      const created = await cli(['token', 'create', 'other', '--subject', 'svc:other'], admin());
      const user = userEnv();
      await cli(['login', '--token', created.stdout.trim()], user.env);
      const who = await cli(['whoami', '--json'], { ...user.env, STATEHOUSE_TOKEN: TEST_TOKEN });
      expect(JSON.parse(who.stdout).subject).toBe('bootstrap-admin');
    });
  });

  describe('units over the management API', () => {
    const name = 'team-a/network/prod';
    const lineage = '0c3f0f3e-1b1e-4f3a-9d6f-2a1d5f1e7c11';
    let dir: string;

    beforeAll(() => {
      dir = tempDir();
    });

    it('create, ls and show (names with slashes are URL-encoded)', async () => {
      const created = await cli(['unit', 'create', name], admin());
      expect(created.code).toBe(0);
      expect((await cli(['unit', 'create', 'team-b/app'], admin())).code).toBe(0);

      const ls = await cli(['unit', 'ls', '--prefix', 'team-a/'], admin());
      expect(ls.code).toBe(0);
      expect(ls.stdout).toMatch(/^NAME\s+CREATED\s+CREATED BY\n/);
      expect(ls.stdout).toContain(name);
      expect(ls.stdout).not.toContain('team-b/app');
      const all = JSON.parse((await cli(['unit', 'ls', '--json'], admin())).stdout) as {
        name: string;
      }[];
      expect(all.map((u) => u.name)).toEqual(expect.arrayContaining([name, 'team-b/app']));

      const show = await cli(['unit', 'show', name], admin());
      expect(show.code).toBe(0);
      expect(show.stdout).toContain(`name:       ${name}`);
      expect(show.stdout).toMatch(/^default\s+-\s+-\s+-/m);
    });

    it('a duplicate create fails with the server message on one line', async () => {
      const r = await cli(['unit', 'create', name], admin());
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/^statehouse: [^\n]+\n$/);
    });

    it('push streams the file; pull gives back the exact bytes (stdout and -o)', async () => {
      const v1 = stateBytes(1, lineage);
      const v1File = join(dir, 'v1.tfstate');
      writeFileSync(v1File, v1);
      const pushed = await cli(['unit', 'push', name, v1File, '--json'], admin());
      expect(pushed.code).toBe(0);
      expect(JSON.parse(pushed.stdout)).toMatchObject({
        created: true,
        version: { version: 1, serial: 1, lineage, size: v1.length },
      });

      const pulled = await cli(['unit', 'pull', name], admin());
      expect(pulled.code).toBe(0);
      expect(pulled.stdoutBytes.equals(v1)).toBe(true);

      // A larger state (several MiB) goes through the same streaming path.
      const v2 = stateBytes(2, lineage, 'x'.repeat(3 * 1024 * 1024));
      const v2File = join(dir, 'v2.tfstate');
      writeFileSync(v2File, v2);
      const human = await cli(['unit', 'push', name, v2File], admin());
      expect(human.code).toBe(0);
      expect(human.stderr).toContain(`Pushed ${name} (default): version 2, serial 2`);

      const outFile = join(dir, 'pulled.tfstate');
      const toFile = await cli(['unit', 'pull', name, '-o', outFile], admin());
      expect(toFile.code).toBe(0);
      expect(toFile.stdout).toBe('');
      expect(readFileSync(outFile).equals(v2)).toBe(true);
      expect(statSync(outFile).mode & 0o777).toBe(0o600);

      const again = await cli(['unit', 'push', name, v2File], admin());
      expect(again.stderr).toContain('Unchanged');
    });

    it('push and pull address a workspace with -w', async () => {
      const staging = stateBytes(1, lineage, ' staging');
      const file = join(dir, 'staging.tfstate');
      writeFileSync(file, staging);
      expect((await cli(['unit', 'push', name, file, '-w', 'staging'], admin())).code).toBe(0);
      const pulled = await cli(['unit', 'pull', name, '--workspace', 'staging'], admin());
      expect(pulled.stdoutBytes.equals(staging)).toBe(true);
      const missing = await cli(['unit', 'pull', name, '-w', 'nowhere'], admin());
      expect(missing.code).toBe(1);
      expect(missing.stdout).toBe('');
      expect(missing.stderr).toMatch(/^statehouse: [^\n]+\n$/);
    });

    it('versions lists newest first; restore makes an old version current byte for byte', async () => {
      const versions = await cli(['unit', 'versions', name, '--json'], admin());
      const items = JSON.parse(versions.stdout) as { version: number; serial: number }[];
      expect(items.map((v) => v.version)).toEqual([2, 1]);
      const table = await cli(['unit', 'versions', name], admin());
      expect(table.stdout).toMatch(/^VERSION\s+SERIAL\s+SIZE\s+SHA256/);

      const restored = await cli(['unit', 'restore', name, '1'], admin());
      expect(restored.code).toBe(0);
      expect(restored.stderr).toContain(`Restored version 1 of ${name} (default) as version 3`);
      const pulled = await cli(['unit', 'pull', name], admin());
      expect(pulled.stdoutBytes.equals(stateBytes(1, lineage))).toBe(true);
      const after = JSON.parse((await cli(['unit', 'versions', name, '--json'], admin())).stdout);
      expect(after[0]).toMatchObject({ version: 3, restoredFrom: 1 });

      const bad = await cli(['unit', 'restore', name, 'latest'], admin());
      expect(bad.code).toBe(2);
    });

    it('rm deletes the unit (soft)', async () => {
      const rm = await cli(['unit', 'rm', 'team-b/app'], admin());
      expect(rm.code).toBe(0);
      const ls = JSON.parse((await cli(['unit', 'ls', '--json'], admin())).stdout) as {
        name: string;
      }[];
      expect(ls.map((u) => u.name)).not.toContain('team-b/app');
    });
  });

  describe('locks over the management API', () => {
    const name = 'team-a/locked/app';
    let other: Record<string, string>;

    beforeAll(async () => {
      expect((await cli(['unit', 'create', name], admin())).code).toBe(0);
      const created = await cli(['token', 'create', 'locker', '--subject', 'svc:locker'], admin());
      other = { ...userEnv().env, STATEHOUSE_TOKEN: created.stdout.trim() };
    });

    it('acquire, conflict, ls, write with the lock id, release', async () => {
      const acquired = await cli(
        [
          'lock',
          'acquire',
          name,
          '--info',
          '{"Who":"me@ci","Operation":"OperationTypeApply"}',
          '--json',
        ],
        admin(),
      );
      expect(acquired.code).toBe(0);
      const lock = JSON.parse(acquired.stdout);
      expect(lock).toMatchObject({
        unit: name,
        workspace: 'default',
        principal: 'bootstrap-admin',
        info: { Who: 'me@ci', Operation: 'OperationTypeApply' },
      });

      const conflict = await cli(['lock', 'acquire', name], other);
      expect(conflict.code).toBe(1);
      expect(conflict.stderr).toMatch(
        new RegExp(`^statehouse: .*bootstrap-admin.*lock ID ${lock.id}.*who me@ci[^\\n]*\\n$`),
      );

      const ls = await cli(['lock', 'ls'], admin());
      expect(ls.stdout).toMatch(/^UNIT\s+WORKSPACE\s+ID\s+HOLDER/);
      expect(ls.stdout).toContain(lock.id);
      expect(ls.stdout).toContain('OperationTypeApply');

      const file = join(tempDir(), 's.tfstate');
      writeFileSync(file, stateBytes(1, '11111111-2222-3333-4444-555555555555'));
      const without = await cli(['unit', 'push', name, file], admin());
      expect(without.code).toBe(1);
      const withId = await cli(['unit', 'push', name, file, '--lock-id', lock.id], admin());
      expect(withId.code).toBe(0);

      const release = await cli(['lock', 'release', name, '--id', lock.id], admin());
      expect(release.code).toBe(0);
      expect(JSON.parse((await cli(['lock', 'ls', '--json'], admin())).stdout)).toEqual([]);
    });

    it('acquire prints the generated lock ID; force-unlock removes a lock held by another', async () => {
      const acquired = await cli(['lock', 'acquire', name], other);
      expect(acquired.code).toBe(0);
      const id = acquired.stdout.trim();
      expect(id.length).toBeGreaterThan(0);
      const forced = await cli(['lock', 'force-unlock', name], admin());
      expect(forced.code).toBe(0);
      expect(forced.stderr).toContain(
        `Removed lock ${id} on ${name} (default), held by svc:locker`,
      );
      const again = await cli(['lock', 'force-unlock', name], admin());
      expect(again.stderr).toContain('was not locked');
    });

    it('usage errors exit 2: bad --info, missing --id, missing argument', async () => {
      const info = await cli(['lock', 'acquire', name, '--info', 'not json'], admin());
      expect(info.code).toBe(2);
      expect(info.stderr).toBe('statehouse: --info must be a JSON object (a Terraform LockInfo)\n');
      const noId = await cli(['lock', 'release', name], admin());
      expect(noId.code).toBe(2);
      expect(noId.stderr).toMatch(/^statehouse: required option '--id <id>' not specified\n/);
      const noName = await cli(['unit', 'pull'], admin());
      expect(noName.code).toBe(2);
      expect(noName.stderr).toMatch(/^statehouse: missing required argument 'name'\n/);
    });
  });
});
