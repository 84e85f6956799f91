import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freshServerEnv } from '../support/database';
import { CLI, TEST_TOKEN } from '../support/paths';
import { NODE, RunningServer, spawnServer } from '../support/server';

/**
 * The real AWS CLI (v1, botocore) runs `statehouse creds --json` as its `credential_process`
 * and obtains the S3 credentials the server issued. Needs `aws` on the PATH: without it the
 * suite fails (it does not skip), because this is the path Terraform's S3 backend users take.
 */

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(cmd: string, args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((resolve, reject) => {
    const proc = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    proc.once('error', reject);
    proc.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

function which(cmd: string): string | undefined {
  try {
    return (
      execFileSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' }).trim() || undefined
    );
  } catch {
    return undefined;
  }
}

/**
 * The Python interpreter the `aws` command runs on (its shebang), seeing through pyenv shims;
 * undefined when that Python cannot import botocore.
 */
function botocorePython(): string | undefined {
  let aws = which('aws');
  if (!aws) return undefined;
  const shebang = (file: string): string =>
    readFileSync(file, 'utf8')
      .split('\n')[0]
      .replace(/^#!\s*/, '')
      .trim();
  let interpreter = shebang(aws);
  if (!/python/.test(interpreter) && which('pyenv')) {
    try {
      aws = execFileSync('pyenv', ['which', 'aws'], { encoding: 'utf8' }).trim();
      interpreter = shebang(aws);
    } catch {
      return undefined;
    }
  }
  if (!/python/.test(interpreter)) return undefined;
  const [python, ...rest] = interpreter.split(/\s+/);
  const cmd = python.endsWith('/env') ? rest[0] : python;
  try {
    execFileSync(cmd, ['-c', 'import botocore.session'], { stdio: 'ignore' });
    return cmd;
  } catch {
    return undefined;
  }
}

const PYTHON = botocorePython();

/** `aws configure list` prints the last four characters of the keys it obtained. */
function configuredKeys(output: string): { access: string; secret: string } {
  const access = /^\s*access_key\s+\*+(\S{4})\s+custom-process\b/m.exec(output);
  const secret = /^\s*secret_key\s+\*+(\S{4})\s+custom-process\b/m.exec(output);
  if (!access || !secret) throw new Error(`unexpected \`aws configure list\` output:\n${output}`);
  return { access: access[1], secret: secret[1] };
}

describe('the AWS CLI with credential_process = statehouse creds --json', () => {
  let server: RunningServer;
  let cleanup: () => Promise<void>;
  let dir: string;
  let teeDir: string;
  let serviceToken: string;
  let baseEnv: Record<string, string>;

  /** The environment the `aws` process (and so its credential_process) gets. */
  const awsEnv = (extra: Record<string, string>): Record<string, string> => ({
    ...baseEnv,
    AWS_CONFIG_FILE: join(dir, 'config'),
    AWS_SHARED_CREDENTIALS_FILE: join(dir, 'credentials'),
    AWS_EC2_METADATA_DISABLED: 'true',
    HOME: join(dir, 'home'),
    XDG_CONFIG_HOME: join(dir, 'home', 'xdg'),
    STATEHOUSE_SERVER: server.url,
    ...extra,
  });

  /** Every credentials JSON the teeing wrapper saw, oldest first. */
  const teed = (): Record<string, string | number>[] =>
    readdirSync(teeDir)
      .sort()
      .map((f) => JSON.parse(readFileSync(join(teeDir, f), 'utf8')));

  beforeAll(async () => {
    if (!which('aws')) {
      throw new Error(
        'the AWS CLI (`aws`, v1) is not on the PATH: this suite needs it (pip install awscli)',
      );
    }
    const fresh = await freshServerEnv();
    cleanup = fresh.cleanup;
    // One hour, not the default 15 minutes: botocore refreshes process credentials that have
    // less than 15 minutes left (advisory window) on every access, so with 15-minute
    // credentials each use of the keys runs credential_process again.
    server = await spawnServer({ ...fresh.env, STATEHOUSE_STS_TTL: '1h' });

    dir = mkdtempSync(join(tmpdir(), 'statehouse-aws-'));
    teeDir = join(dir, 'teed');
    execFileSync('mkdir', ['-p', teeDir, join(dir, 'home')]);
    writeFileSync(join(dir, 'credentials'), '');
    // A tiny wrapper that keeps a copy of what the CLI printed, to compare with what aws got.
    const wrapper = join(dir, 'creds-tee.sh');
    writeFileSync(
      wrapper,
      [
        '#!/bin/sh',
        `out=$("${NODE}" "${CLI}" creds --json) || exit $?`,
        `printf '%s\\n' "$out" > "${teeDir}/$(date +%s%N)-$$.json"`,
        `printf '%s\\n' "$out"`,
        '',
      ].join('\n'),
    );
    chmodSync(wrapper, 0o755);
    writeFileSync(
      join(dir, 'config'),
      [
        '[profile p]',
        `credential_process = "${NODE}" "${CLI}" creds --json`,
        'region = us-east-1',
        '',
        '[profile teed]',
        `credential_process = "${wrapper}"`,
        'region = us-east-1',
        '',
      ].join('\n'),
    );

    baseEnv = {};
    for (const [k, v] of Object.entries(process.env)) {
      if (v === undefined || k.startsWith('STATEHOUSE_') || k.startsWith('AWS_')) continue;
      if (k === 'DATABASE_URL') continue;
      baseEnv[k] = v;
    }

    const res = await fetch(`${server.url}/v1/auth/tokens`, {
      method: 'POST',
      headers: { ...server.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'terraform-s3', subject: 'svc:terraform' }),
    });
    expect(res.status).toBe(201);
    serviceToken = ((await res.json()) as { token: string }).token;
  });

  afterAll(async () => {
    await server?.stop();
    await cleanup?.();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('aws configure list obtains keys of type custom-process from statehouse creds --json', async () => {
    const r = await run(
      'aws',
      ['configure', 'list', '--profile', 'p'],
      awsEnv({
        STATEHOUSE_TOKEN: serviceToken,
      }),
    );
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const keys = configuredKeys(r.stdout);
    expect(keys.access).toMatch(/^\S{4}$/);
  });

  it('the keys aws obtained are the ones the server issued (through a teeing wrapper)', async () => {
    const r = await run(
      'aws',
      ['configure', 'list', '--profile', 'teed'],
      awsEnv({
        STATEHOUSE_TOKEN: serviceToken,
      }),
    );
    expect(r.code).toBe(0);
    const issued = teed();
    expect(issued).toHaveLength(1);
    const last = issued[0];
    expect(last.Version).toBe(1);
    const keys = configuredKeys(r.stdout);
    expect(keys.access).toBe(String(last.AccessKeyId).slice(-4));
    expect(keys.secret).toBe(String(last.SecretAccessKey).slice(-4));
  });

  (PYTHON ? it : it.skip)(
    'botocore reads the frozen credentials: the session token is an S3 session token for the caller, refused by the API',
    async () => {
      const script = [
        'import botocore.session, json',
        "c = botocore.session.Session(profile='teed').get_credentials().get_frozen_credentials()",
        "print(json.dumps({'access_key': c.access_key, 'secret_key': c.secret_key, 'token': c.token}))",
      ].join('\n');
      const before = teed().length;
      const r = await run(
        PYTHON as string,
        ['-c', script],
        awsEnv({ STATEHOUSE_TOKEN: serviceToken }),
      );
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      const frozen = JSON.parse(r.stdout) as {
        access_key: string;
        secret_key: string;
        token: string;
      };
      const issued = teed();
      expect(issued.length).toBe(before + 1);
      const last = issued[issued.length - 1];
      expect(frozen).toEqual({
        access_key: last.AccessKeyId,
        secret_key: last.SecretAccessKey,
        token: last.SessionToken,
      });

      const claims = JSON.parse(Buffer.from(frozen.token.split('.')[1], 'base64url').toString());
      expect(claims).toMatchObject({ sub: 'svc:terraform', aud: ['s3'] });
      expect(typeof claims.sid).toBe('string');

      // A session token is not an API token: the management API refuses it, saying why.
      const me = await fetch(`${server.url}/v1/auth/me`, {
        headers: { authorization: `Bearer ${frozen.token}` },
      });
      expect(me.status).toBe(401);
      expect(((await me.json()) as { message: string }).message).toMatch(/audience/);
    },
  );

  it('works from the stored login too (statehouse login --token, no STATEHOUSE_TOKEN)', async () => {
    const env = awsEnv({});
    const login = await run(NODE, [CLI, 'login', '--token', serviceToken], env);
    expect(login.code).toBe(0);
    const before = teed().length;
    const r = await run('aws', ['configure', 'list', '--profile', 'teed'], env);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const issued = teed();
    expect(issued).toHaveLength(before + 1);
    expect(configuredKeys(r.stdout).access).toBe(
      String(issued[issued.length - 1].AccessKeyId).slice(-4),
    );
  });

  it("a refused token fails the aws command with statehouse's message", async () => {
    const r = await run(
      'aws',
      ['configure', 'list', '--profile', 'p'],
      awsEnv({
        STATEHOUSE_TOKEN: 'sht_revoked-or-never-issued',
      }),
    );
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('custom-process');
    expect(r.stderr).toContain('statehouse: ');
    expect(r.stderr).not.toContain('sht_revoked-or-never-issued');
  });

  it('the bootstrap token through STATEHOUSE_TOKEN gets no credentials: the CLI says to create an API token', async () => {
    const r = await run(NODE, [CLI, 'creds', '--json'], awsEnv({ STATEHOUSE_TOKEN: TEST_TOKEN }));
    expect(r.code).not.toBe(0);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/bootstrap-admin is the break-glass account .* create an API token/);
    expect(r.stderr).not.toContain(TEST_TOKEN);
  });
});
