/**
 * `terraform login` end to end: the real Terraform (1.11.x on the PATH) logs in to the real
 * server over its own TLS, the person signs in at the real test OpenID provider in a real
 * headless Chromium (playwright-core, Debian's /usr/bin/chromium), and the token Terraform
 * saved in credentials.tfrc.json then carries a `cloud {}` init and apply.
 *
 * Terraform opens the browser through `xdg-open`; the PATH here starts with a stand-in that
 * writes the URL to a file, and the test opens that URL in Chromium — the only stand-in, for
 * a desktop this machine does not have. The CLI config is a clean, empty HOME (Terraform
 * refuses to log in to a host a `credentials` block already names; and with
 * TF_CLI_CONFIG_FILE set it would not read the credentials.tfrc.json it writes). Without
 * `terraform` or Chromium this suite FAILS.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { startOidcProvider, TestOidcProvider } from '../support/oidc';
import { RunningServer } from '../support/server';
import { bearerTlsFetch, TlsAnswer, tlsFetch, startTlsServer, TlsServer } from '../support/tfe';
import * as tf from '../support/terraform';

jest.setTimeout(180_000);

const CHROMIUM = '/usr/bin/chromium';

const CONFIG = (host: string): string => `
terraform {
  cloud {
    hostname     = "${host}"
    organization = "acme"
    workspaces {
      name = "logged-in"
    }
  }
}

resource "terraform_data" "main" {
  input = "from a terraform login token"
}

output "who" {
  value = terraform_data.main.output
}
`;

async function waitForFile(file: string, timeoutMs: number, what: () => string): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  while (!existsSync(file) || fs.readFileSync(file, 'utf8').trim() === '') {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${file}:\n${what()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return fs.readFileSync(file, 'utf8').trim();
}

describe('terraform login against Statehouse, then cloud {} with the saved token', () => {
  let provider: TestOidcProvider;
  let server: RunningServer;
  let tls: TlsServer | undefined;
  let scratch: string;
  let ca: string;
  let host: string;
  let base: string;
  let home: string;
  let tfEnv: Record<string, string>;

  const api = (path: string, init: Parameters<typeof tlsFetch>[3] = {}): Promise<TlsAnswer> =>
    bearerTlsFetch(base, ca, server.token, path, init);

  beforeAll(async () => {
    if (tf.TERRAFORM === undefined) throw new Error(tf.TERRAFORM_MISSING);
    if (!existsSync(CHROMIUM)) {
      throw new Error(
        `Chromium is not installed at ${CHROMIUM}: this suite needs it (Debian: apt-get install -y chromium; CI=true .ci/run installs it)`,
      );
    }
    scratch = fs.mkdtempSync(join(tmpdir(), 'statehouse-tflogin-'));
    tls = await startTlsServer(scratch, async (at) => {
      provider = await startOidcProvider([`${at}/oauth/terraform/callback`]);
      return {
        STATEHOUSE_OIDC_ISSUER: provider.issuer,
        STATEHOUSE_OIDC_CLIENT_ID: 'statehouse-web',
        STATEHOUSE_OIDC_SCOPES: 'openid email groups',
      };
    });
    ({ server, ca, host, base } = tls);
    // The person's group administers: what the token may do comes from the login's groups.
    const init = await api('/v1/rbac/init', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ admin: { group: 'alice-group' } }),
    });
    expect(init.status).toBe(201);

    home = join(scratch, 'home');
    fs.mkdirSync(home);
    const bin = join(scratch, 'bin');
    fs.mkdirSync(bin);
    fs.writeFileSync(
      join(bin, 'xdg-open'),
      `#!/bin/sh\nprintf '%s\\n' "$1" > '${join(scratch, 'opened-url')}'\n`,
      { mode: 0o755 },
    );
    // A clean CLI config is an empty HOME, not TF_CLI_CONFIG_FILE: with that variable set,
    // Terraform reads no CLI config directory — nor the credentials.tfrc.json login writes.
    tfEnv = {
      ...tf.cleanEnv(['TF_*', 'CA overrides']),
      HOME: home,
      PATH: `${bin}:${process.env.PATH ?? ''}`,
      TF_IN_AUTOMATION: '1',
      SSL_CERT_FILE: ca,
    };
  });

  afterAll(async () => {
    await tls?.stop();
    await provider?.stop();
    if (scratch) fs.rmSync(scratch, { force: true, recursive: true });
  });

  it('terraform login: the browser signs in at the provider and Terraform saves an API token of that person', async () => {
    const login = spawn(tf.TERRAFORM as string, ['login', host], {
      cwd: scratch,
      env: tfEnv,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let output = '';
    login.stdout.on('data', (d: Buffer) => (output += d.toString()));
    login.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | null>((r) => login.once('exit', r));
    login.stdin.end('yes\n');

    const opened = await waitForFile(join(scratch, 'opened-url'), 60_000, () => output);
    const authz = new URL(opened);
    expect(`${authz.origin}${authz.pathname}`).toBe(`${base}/oauth/terraform/authorize`);
    expect(authz.searchParams.get('code_challenge_method')).toBe('S256');

    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-proxy-server'],
    });
    try {
      const context = await browser.newContext({ ignoreHTTPSErrors: true });
      const page = await context.newPage();
      await page.goto(opened);
      // The provider's own pages: its login form, then its consent form.
      await page.locator('input[name=login]').fill('alice');
      await page.locator('input[name=password]').fill('any');
      await page.locator('button[type=submit]').click();
      await page.locator('button[type=submit]').click();
      await page.waitForURL(/^http:\/\/localhost:100(0\d|10)\/login/, { timeout: 30_000 });
    } finally {
      await browser.close();
    }
    let timer: NodeJS.Timeout | undefined;
    const code = await Promise.race([
      exited,
      new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), 60_000))),
    ]).finally(() => clearTimeout(timer));
    if (code === 'timeout') login.kill('SIGKILL');
    expect([code, output]).toEqual([0, expect.stringContaining('Success!')]);

    const saved = JSON.parse(
      fs.readFileSync(join(home, '.terraform.d', 'credentials.tfrc.json'), 'utf8'),
    ) as { credentials: Record<string, { token: string }> };
    const token = saved.credentials[host]?.token;
    expect(token).toMatch(/^sht_/);
    const me = await tlsFetch(base, ca, '/v1/auth/me', {
      headers: { Authorization: `Bearer ${token}` },
    });
    expect(me.json()).toMatchObject({ subject: 'user:alice', groups: ['platform', 'alice-group'] });
  });

  it('the saved token carries cloud {} init and apply, written as that person', async () => {
    const work = join(scratch, 'work');
    fs.mkdirSync(work);
    fs.writeFileSync(join(work, 'main.tf'), CONFIG(host));
    await tf.runTerraformOk(work, ['init', '-input=false', '-no-color'], tfEnv, {
      timeoutMs: 120_000,
    });
    await tf.runTerraformOk(work, ['apply', '-auto-approve', '-input=false', '-no-color'], tfEnv, {
      timeoutMs: 120_000,
    });
    const versions = await api(`/v1/units/${encodeURIComponent('acme/logged-in')}/versions`);
    expect(versions.status).toBe(200);
    const items = (versions.json() as { items: { door: string; createdBy?: string }[] }).items;
    expect(items).toHaveLength(1);
    expect(items[0]).toMatchObject({ door: 'tfe' });
    expect(JSON.stringify(items[0])).toContain('user:alice');
  });
});
