/**
 * The S3 clients people reach for, each with its own defaults and the configuration the README
 * gives ("Other S3 clients"), against the real `statehouse serve` process with
 * STATEHOUSE_S3_PORT set: rclone 1.60 (`provider = Other`: ListObjects v1 paged by NextMarker,
 * CreateBucket before the first upload, CopyObject on a second sync), s3cmd 2.3 (host:port only,
 * `GET /<bucket>/?location` first, credentials from `statehouse creds --env`) and the AWS CLI v2
 * (`credential_process = statehouse creds --json`). Every result is checked against what the
 * management API says was stored.
 *
 * The tools come from Debian (`apt-get install rclone s3cmd awscli`; `.ci/run` installs them in
 * CI). A missing tool FAILS its part of this suite, naming the tool — never a silent skip. The
 * AWS CLI v2 is found among the `aws` executables on the PATH by its version (v1 may come first).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { freshServerEnv } from '../support/database';
import { CLI, FIXTURES } from '../support/paths';
import { CommandRun as Run, onPath, runCommand } from '../support/processes';
import { apiFetch, NODE, RunningServer, spawnServer, unitVersions } from '../support/server';
import { tfStateBytes } from '../support/tf-state';

jest.setTimeout(180_000);

const SIMPLE = readFileSync(join(FIXTURES, 'simple.tfstate'));

let server: RunningServer;
let cleanup: () => Promise<void>;
let work: string;
let token: string;
/** The environment every tool runs in: nothing of the caller's AWS_*, STATEHOUSE_* or proxies. */
let baseEnv: Record<string, string>;

const run = (cmd: string, args: string[], env: Record<string, string>, cwd = work): Promise<Run> =>
  runCommand(cmd, args, { cwd, env, endsAt: 'close' });

function ok(r: Run, what: string): Run {
  if (r.code !== 0) {
    throw new Error(
      `${what}: exit code ${r.code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}\n--- server (tail)\n${server.output().split('\n').slice(-10).join('\n')}`,
    );
  }
  return r;
}

/** A tool on the PATH, or a failing test that names it and how to install it. */
function required(tool: string, install: string): string {
  const found = onPath(tool);
  if (!found) {
    throw new Error(
      `${tool} is not on the PATH (PATH=${process.env.PATH ?? ''}): this suite needs it (${install}); it does not skip without it`,
    );
  }
  return found;
}

/** The AWS CLI v2 among the `aws` executables on the PATH (the v1 from pip may come first). */
function awsCliV2(): string {
  const seen: string[] = [];
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue;
    const candidate = join(dir, 'aws');
    let version: string;
    try {
      version = execFileSync(candidate, ['--version'], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
        timeout: 30_000,
        env: baseEnv,
      });
    } catch {
      continue;
    }
    if (/^aws-cli\/2\./.test(version)) return candidate;
    seen.push(`${candidate}: ${version.trim()}`);
  }
  throw new Error(
    `no AWS CLI v2 among the \`aws\` executables on the PATH (${seen.join('; ') || 'none'}): this suite needs it (Debian: apt-get install awscli); it does not skip without it`,
  );
}

const api = (path: string, init?: RequestInit): Promise<Response> => apiFetch(server, path, init);

const versions = (unit: string): Promise<number[] | 'no unit'> => unitVersions(server, unit);

async function stateOf(unit: string): Promise<Buffer | number> {
  const r = await api(`/v1/units/${encodeURIComponent(unit)}/state`);
  if (r.status !== 200) return r.status;
  return Buffer.from(await r.arrayBuffer());
}

function tfState(serial: number, lineage: string): Buffer {
  return tfStateBytes({ serial, lineage, checkResults: false });
}

/** Writes files under `dir` (relative path → content), creating folders. */
function files(dir: string, content: Record<string, Buffer>): void {
  for (const [path, body] of Object.entries(content)) {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), body);
  }
}

beforeAll(async () => {
  baseEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined || /^(AWS_|STATEHOUSE_|RCLONE_)/.test(k) || k === 'DATABASE_URL') continue;
    if (/^(https?|no|all)_proxy$/i.test(k)) continue;
    baseEnv[k] = v;
  }
  work = mkdtempSync(join(tmpdir(), 'statehouse-s3-other-clients-'));
  const home = join(work, 'home');
  const bin = join(work, 'bin');
  mkdirSync(join(home, '.aws'), { recursive: true });
  mkdirSync(bin);
  // `statehouse` on the PATH, as an installed package would be.
  writeFileSync(join(bin, 'statehouse'), `#!/bin/sh\nexec '${NODE}' '${CLI}' "$@"\n`, {
    mode: 0o755,
  });

  const fresh = await freshServerEnv();
  cleanup = fresh.cleanup;
  server = await spawnServer({ ...fresh.env, STATEHOUSE_S3_PORT: '0', STATEHOUSE_STS_TTL: '1h' });
  // bootstrap-admin mints no S3 credentials: the clients run as a service principal.
  const created = await api('/v1/auth/tokens', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'other-clients', subject: 'svc:other-clients' }),
  });
  expect(created.status).toBe(201);
  token = ((await created.json()) as { token: string }).token;

  // The README's AWS profile: credentials from `statehouse creds --json`.
  writeFileSync(
    join(home, '.aws', 'config'),
    [
      '[profile statehouse]',
      'region = us-east-1',
      `credential_process = statehouse creds --json --server ${server.url}`,
      '',
    ].join('\n'),
  );
  baseEnv = {
    ...baseEnv,
    PATH: [bin, baseEnv.PATH ?? ''].join(delimiter),
    HOME: home,
    XDG_CONFIG_HOME: join(home, '.config'),
    STATEHOUSE_SERVER: server.url,
    STATEHOUSE_TOKEN: token,
    AWS_EC2_METADATA_DISABLED: 'true',
  };
});

afterAll(async () => {
  await server?.stop();
  await cleanup?.();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('rclone (provider = Other, its own defaults)', () => {
  let rclone: string;
  let config: string;
  const local = () => join(work, 'rclone-files');

  beforeAll(() => {
    rclone = required('rclone', 'Debian: apt-get install rclone');
    config = join(work, 'rclone.conf');
    // The README's configurations: env_auth (the AWS profile's credential_process), at the S3
    // listener and at /s3 on the main port.
    writeFileSync(
      config,
      [
        '[statehouse]',
        'type = s3',
        'provider = Other',
        'env_auth = true',
        `endpoint = ${server.s3Url}`,
        '',
        '[statehouse-main]',
        'type = s3',
        'provider = Other',
        'env_auth = true',
        `endpoint = ${server.url}/s3`,
        '',
      ].join('\n'),
    );
  });

  const rc = (args: string[]) =>
    run(rclone, ['--config', config, ...args], { ...baseEnv, AWS_PROFILE: 'statehouse' });

  it('rclone sync uploads real states (ListObjects v1 first), stored byte for byte', async () => {
    files(local(), {
      'network/terraform.tfstate': SIMPLE,
      'app/terraform.tfstate': tfState(3, 'rclone-app'),
      'tools.tfstate': tfState(1, 'rclone-tools'),
    });
    ok(await rc(['sync', local(), 'statehouse:tfstate/rclone']), 'rclone sync');
    // ListObjects (v1): no list-type, at the root of the S3 listener.
    expect(server.output()).toContain(
      '"url":"/tfstate?delimiter=%2F&max-keys=1000&prefix=rclone%2F"',
    );
    expect(await stateOf('rclone/network')).toEqual(SIMPLE);
    expect(await stateOf('rclone/app')).toEqual(tfState(3, 'rclone-app'));
    expect(await stateOf('rclone/tools.tfstate')).toEqual(tfState(1, 'rclone-tools'));
  });

  it('listings page by NextMarker (one key per page), flat and by directory, on both endpoints', async () => {
    for (const remote of ['statehouse', 'statehouse-main']) {
      const flat = ok(
        await rc(['lsf', '-R', '--files-only', '--s3-list-chunk', '1', `${remote}:tfstate/rclone`]),
        'rclone lsf -R',
      );
      expect(flat.stdout.split('\n').filter((l) => l !== '')).toEqual([
        'app/terraform.tfstate',
        'network/terraform.tfstate',
        'tools.tfstate',
      ]);
      const dirs = ok(
        await rc(['lsf', '--s3-list-chunk', '1', `${remote}:tfstate/rclone`]),
        'rclone lsf',
      );
      expect(dirs.stdout.split('\n').filter((l) => l !== '')).toEqual([
        'app/',
        'network/',
        'tools.tfstate',
      ]);
    }
    // The second page of each started at the first page's NextMarker (a key, a common prefix).
    expect(server.output()).toContain(
      '"url":"/tfstate?delimiter=&marker=rclone%2Fapp%2Fterraform.tfstate&max-keys=1&prefix=rclone%2F"',
    );
    expect(server.output()).toContain(
      '"url":"/s3/tfstate?delimiter=%2F&marker=rclone%2Fapp%2F&max-keys=1&prefix=rclone%2F"',
    );
  });

  it('an upload to a new key from a fresh process creates the bucket first (answered as owned) and succeeds', async () => {
    writeFileSync(join(work, 'single.tfstate'), tfState(1, 'rclone-single'));
    const r = ok(
      await rc([
        'copyto',
        '-v',
        join(work, 'single.tfstate'),
        'statehouse:tfstate/rclone-single/terraform.tfstate',
      ]),
      'rclone copyto',
    );
    expect(r.stderr).toContain('Bucket "tfstate" created');
    expect(await stateOf('rclone-single')).toEqual(tfState(1, 'rclone-single'));
    const cat = ok(
      await rc(['cat', 'statehouse-main:tfstate/rclone-single/terraform.tfstate']),
      'rclone cat',
    );
    expect(cat.stdout).toBe(tfState(1, 'rclone-single').toString());
  });

  it('a second rclone sync: without flags CopyObject is refused naming --use-server-modtime; with --update --use-server-modtime nothing is sent', async () => {
    const before = await versions('rclone/app');
    // Local files older than what the server holds (rclone compares modification times).
    const past = new Date(Date.now() - 3600_000);
    for (const f of ['network/terraform.tfstate', 'app/terraform.tfstate', 'tools.tfstate'])
      utimesSync(join(local(), f), past, past);
    const plain = await rc(['sync', '--retries', '1', local(), 'statehouse:tfstate/rclone']);
    expect(plain.code).not.toBe(0);
    expect(plain.stderr).toContain('NotImplemented: CopyObject');
    expect(plain.stderr).toContain('--update --use-server-modtime');
    const again = ok(
      await rc([
        'sync',
        '-v',
        '--update',
        '--use-server-modtime',
        local(),
        'statehouse:tfstate/rclone',
      ]),
      'rclone sync --update --use-server-modtime',
    );
    expect(again.stderr).toContain('There was nothing to transfer');
    expect(await versions('rclone/app')).toEqual(before);
    // A local change (newer than the server's copy) is uploaded.
    writeFileSync(join(local(), 'app/terraform.tfstate'), tfState(4, 'rclone-app'));
    ok(
      await rc(['sync', '--update', '--use-server-modtime', local(), 'statehouse:tfstate/rclone']),
      'rclone sync of a change',
    );
    expect(await stateOf('rclone/app')).toEqual(tfState(4, 'rclone-app'));
    expect(await versions('rclone/app')).toEqual([2, 1]);
  });

  it('static credentials (access_key_id, secret_access_key, session_token from statehouse creds --json) work too', async () => {
    const creds = JSON.parse(
      ok(await run('statehouse', ['creds', '--json'], baseEnv), 'statehouse creds --json').stdout,
    ) as { AccessKeyId: string; SecretAccessKey: string; SessionToken: string };
    const staticConfig = join(work, 'rclone-static.conf');
    writeFileSync(
      staticConfig,
      [
        '[statehouse]',
        'type = s3',
        'provider = Other',
        `endpoint = ${server.s3Url}`,
        `access_key_id = ${creds.AccessKeyId}`,
        `secret_access_key = ${creds.SecretAccessKey}`,
        `session_token = ${creds.SessionToken}`,
        '',
      ].join('\n'),
    );
    const r = ok(
      await run(
        rclone,
        ['--config', staticConfig, 'lsf', '-R', '--files-only', 'statehouse:tfstate/rclone'],
        baseEnv,
      ),
      'rclone lsf with static credentials',
    );
    expect(r.stdout).toContain('app/terraform.tfstate');
  });
});

describe('statehouse creds --env (for clients without credential_process)', () => {
  it('statehouse creds --env prints the exports and, as a comment, when they expire', async () => {
    const r = ok(await run('statehouse', ['creds', '--env'], baseEnv), 'statehouse creds --env');
    expect(r.stderr).toBe('');
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(
      /^# Statehouse S3 credentials, valid until (\S+Z): run `statehouse creds --env` again/,
    );
    const expiry = Date.parse(/valid until (\S+Z)/.exec(lines[0])?.[1] ?? '');
    expect(expiry).toBeGreaterThan(Date.now() + 50 * 60_000); // STATEHOUSE_STS_TTL=1h
    expect(lines.slice(1).map((l) => l.replace(/=.*/, '='))).toEqual([
      'export AWS_ACCESS_KEY_ID=',
      'export AWS_SECRET_ACCESS_KEY=',
      'export AWS_SESSION_TOKEN=',
      'export AWS_CREDENTIAL_EXPIRATION=',
    ]);
    // The same credentials through a shell.
    const shell = ok(
      await run(
        'bash',
        [
          '-c',
          'eval "$(statehouse creds --env)"; echo "$AWS_ACCESS_KEY_ID $AWS_CREDENTIAL_EXPIRATION"',
        ],
        baseEnv,
      ),
      'eval',
    );
    expect(shell.stdout).toMatch(/^SHK\S+ \S+Z\n$/);
    const both = await run('statehouse', ['creds', '--env', '--json'], baseEnv);
    expect({ code: both.code, stdout: both.stdout }).toEqual({ code: 2, stdout: '' });
  });
});

describe('s3cmd (host_base = host_bucket = the S3 port, credentials from statehouse creds --env)', () => {
  let s3cfg: string;

  beforeAll(() => {
    required('s3cmd', 'Debian: apt-get install s3cmd');
    s3cfg = join(work, 's3cfg');
    const hostPort = `127.0.0.1:${server.s3Port}`;
    writeFileSync(
      s3cfg,
      [
        '[default]',
        `host_base = ${hostPort}`,
        `host_bucket = ${hostPort}`,
        'use_https = False',
        '',
      ].join('\n'),
    );
  });

  /** `eval "$(statehouse creds --env)"`, then s3cmd, as the README shows. */
  const s3cmd = (args: string[]) =>
    run(
      'bash',
      [
        '-c',
        'set -euo pipefail; eval "$(statehouse creds --env)"; exec s3cmd -c "$0" "$@"',
        s3cfg,
        ...args,
      ],
      baseEnv,
    );

  it('s3cmd put, ls, ls -r, get: real states, byte for byte (GetBucketLocation first)', async () => {
    writeFileSync(join(work, 'cmd.tfstate'), SIMPLE);
    ok(
      await s3cmd(['put', join(work, 'cmd.tfstate'), 's3://tfstate/s3cmd/app/terraform.tfstate']),
      's3cmd put',
    );
    expect(await stateOf('s3cmd/app')).toEqual(SIMPLE);
    ok(
      await s3cmd(['put', join(work, 'cmd.tfstate'), 's3://tfstate/s3cmd/other.tfstate']),
      's3cmd put',
    );

    const buckets = ok(await s3cmd(['ls']), 's3cmd ls');
    expect(buckets.stdout).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d {2}s3:\/\/tfstate$/m);
    const dirs = ok(await s3cmd(['ls', 's3://tfstate/s3cmd/']), 's3cmd ls s3://tfstate/s3cmd/');
    expect(dirs.stdout).toMatch(/DIR\s+s3:\/\/tfstate\/s3cmd\/app\//);
    expect(dirs.stdout).toMatch(/\s3005\s+s3:\/\/tfstate\/s3cmd\/other\.tfstate/);
    const all = ok(await s3cmd(['ls', '-r', 's3://tfstate/s3cmd/']), 's3cmd ls -r');
    expect(all.stdout.match(/s3:\/\/\S+/g)).toEqual([
      's3://tfstate/s3cmd/app/terraform.tfstate',
      's3://tfstate/s3cmd/other.tfstate',
    ]);
    const got = join(work, 'cmd-got.tfstate');
    ok(
      await s3cmd(['get', '--force', 's3://tfstate/s3cmd/app/terraform.tfstate', got]),
      's3cmd get',
    );
    expect(readFileSync(got)).toEqual(SIMPLE);
    expect(server.output()).toContain('/tfstate/?location');
  });

  it('s3cmd del deletes the state (soft: its versions stay restorable)', async () => {
    ok(await s3cmd(['del', 's3://tfstate/s3cmd/other.tfstate']), 's3cmd del');
    expect(await stateOf('s3cmd/other.tfstate')).toBe(404);
    expect(await versions('s3cmd/other.tfstate')).toEqual([1]);
  });
});

describe('the AWS CLI v2 (credential_process = statehouse creds --json)', () => {
  let aws: string;

  beforeAll(() => {
    aws = awsCliV2();
  });

  const endpoints = () => [`${server.url}/s3`, server.s3Url as string];
  const awsAt = (endpoint: string, args: string[]) =>
    run(aws, ['--profile', 'statehouse', '--endpoint-url', endpoint, ...args], baseEnv);

  it('s3 cp up and down, s3 ls --recursive, s3api head-object and list-objects-v2 (paged), on both endpoints', async () => {
    for (const [i, endpoint] of endpoints().entries()) {
      const unit = `awsv2/e${i}`;
      const key = `${unit}/terraform.tfstate`;
      writeFileSync(join(work, 'v2.tfstate'), SIMPLE);
      ok(
        await awsAt(endpoint, [
          's3',
          'cp',
          '--only-show-errors',
          join(work, 'v2.tfstate'),
          `s3://tfstate/${key}`,
        ]),
        `aws s3 cp up (${endpoint})`,
      );
      expect(await stateOf(unit)).toEqual(SIMPLE);
      const down = join(work, `v2-down-${i}.tfstate`);
      ok(
        await awsAt(endpoint, ['s3', 'cp', '--only-show-errors', `s3://tfstate/${key}`, down]),
        'aws s3 cp down',
      );
      expect(readFileSync(down)).toEqual(SIMPLE);

      const ls = ok(
        await awsAt(endpoint, ['s3', 'ls', 's3://tfstate/awsv2/', '--recursive']),
        'aws s3 ls',
      );
      expect(ls.stdout).toMatch(new RegExp(`\\s${SIMPLE.length} ${key}$`, 'm'));

      const head = JSON.parse(
        ok(
          await awsAt(endpoint, ['s3api', 'head-object', '--bucket', 'tfstate', '--key', key]),
          'head-object',
        ).stdout,
      ) as { ContentLength: number; ETag: string };
      expect(head.ContentLength).toBe(SIMPLE.length);
      expect(head.ETag).toMatch(/^"[0-9a-f]{32}"$/);

      const listed = JSON.parse(
        ok(
          await awsAt(endpoint, [
            's3api',
            'list-objects-v2',
            '--bucket',
            'tfstate',
            '--prefix',
            'awsv2/',
            '--page-size',
            '1',
          ]),
          'list-objects-v2',
        ).stdout,
      ) as { Contents: { Key: string; Size: number }[] };
      expect(listed.Contents.map((c) => c.Key)).toEqual(
        Array.from({ length: i + 1 }, (_, n) => `awsv2/e${n}/terraform.tfstate`),
      );
    }
    const buckets = ok(await awsAt(server.s3Url as string, ['s3', 'ls']), 'aws s3 ls (buckets)');
    expect(buckets.stdout).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d tfstate$/m);
  });
});
