import { execFile } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freshServerEnv } from '../support/database';
import { CLI, ROOT } from '../support/paths';
import { childEnv, NODE, RunningServer, spawnServer } from '../support/server';
import { startTcpProxy } from '../support/tcp-proxy';

/**
 * `statehouse creds` keeps the S3 credentials it was issued in a cache file beside the stored
 * logins and hands them out again while more than 5 minutes are left: the real CLI process
 * against a real server, each test with its own config directory.
 */

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

interface Creds {
  Version: number;
  AccessKeyId: string;
  SecretAccessKey: string;
  SessionToken: string;
  Expiration: string;
}

const execFileAsync = promisify(execFile);

async function statehouse(args: string[], env: Record<string, string>): Promise<Run> {
  try {
    const r = await execFileAsync(NODE, [CLI, ...args], {
      env: { ...childEnv(), NODE_ENV: 'production', ...env },
    });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const f = e as { code?: unknown; stdout?: string; stderr?: string };
    return {
      code: typeof f.code === 'number' ? f.code : null,
      stdout: f.stdout ?? '',
      stderr: f.stderr ?? '',
    };
  }
}

describe('statehouse creds: the credentials cache', () => {
  let server: RunningServer;
  let cleanup: () => Promise<void>;
  const dirs: string[] = [];
  let tokenA: string;
  let tokenB: string;

  /** A user with an empty config directory, on the suite's server with API token A. */
  const user = (extra: Record<string, string> = {}) => {
    const home = mkdtempSync(join(tmpdir(), 'statehouse-creds-cache-'));
    dirs.push(home);
    const config = join(home, 'xdg', 'statehouse');
    return {
      env: {
        HOME: home,
        XDG_CONFIG_HOME: join(home, 'xdg'),
        STATEHOUSE_SERVER: server.url,
        STATEHOUSE_TOKEN: tokenA,
        ...extra,
      },
      cacheFile: join(config, 's3-credentials-cache.json'),
      credentialsFile: join(config, 'credentials.json'),
    };
  };

  /** `statehouse creds --json` that must succeed: the credentials it printed. */
  const creds = async (env: Record<string, string>, args: string[] = []): Promise<Creds> => {
    const r = await statehouse(['creds', '--json', ...args], env);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    return JSON.parse(r.stdout) as Creds;
  };

  const apiToken = async (subject: string): Promise<string> => {
    const res = await fetch(`${server.url}/v1/auth/tokens`, {
      method: 'POST',
      headers: { ...server.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ name: subject.replace(':', '-'), subject }),
    });
    expect(res.status).toBe(201);
    return ((await res.json()) as { token: string }).token;
  };

  const cacheEntries = (file: string): Record<string, Creds> =>
    (JSON.parse(readFileSync(file, 'utf8')) as { entries: Record<string, Creds> }).entries;

  beforeAll(async () => {
    const fresh = await freshServerEnv();
    cleanup = fresh.cleanup;
    server = await spawnServer(fresh.env);
    tokenA = await apiToken('svc:cache-a');
    tokenB = await apiToken('svc:cache-b');
  });

  afterAll(async () => {
    await server?.stop();
    await cleanup?.();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('a warm cache is reused: the same credentials again, even with the server unreachable', async () => {
    const proxy = await startTcpProxy({ host: '127.0.0.1', port: server.port });
    try {
      const u = user({ STATEHOUSE_SERVER: `http://127.0.0.1:${proxy.port}` });
      const first = await creds(u.env);
      expect(Date.parse(first.Expiration) - Date.now()).toBeGreaterThan(10 * 60_000);
      proxy.down('refuse');
      expect(await creds(u.env)).toEqual(first);
      // `--env` hands out the same ones.
      const env = await statehouse(['creds', '--env'], u.env);
      expect(env.code).toBe(0);
      expect(env.stdout).toContain(`export AWS_ACCESS_KEY_ID=${first.AccessKeyId}\n`);
    } finally {
      await proxy.close();
    }
  });

  it('the cache file is mode 0600 in a 0700 directory and holds no token', async () => {
    const u = user();
    await creds(u.env);
    expect(statSync(u.cacheFile).mode & 0o777).toBe(0o600);
    expect(statSync(join(u.cacheFile, '..')).mode & 0o777).toBe(0o700);
    expect(readFileSync(u.cacheFile, 'utf8')).not.toContain(tokenA);
  });

  it('with 5 minutes or less left it asks the server again and rewrites the cache; with more it does not', async () => {
    const u = user();
    const first = await creds(u.env);
    const setExpiration = (ms: number): void => {
      const entries = cacheEntries(u.cacheFile);
      for (const e of Object.values(entries))
        e.Expiration = new Date(Date.now() + ms).toISOString();
      writeFileSync(u.cacheFile, JSON.stringify({ entries }));
    };
    setExpiration(6 * 60_000);
    expect((await creds(u.env)).AccessKeyId).toBe(first.AccessKeyId);
    setExpiration(4 * 60_000);
    const second = await creds(u.env);
    expect(second.AccessKeyId).not.toBe(first.AccessKeyId);
    expect(Object.values(cacheEntries(u.cacheFile))).toEqual([second]);
    expect(statSync(u.cacheFile).mode & 0o777).toBe(0o600);
  });

  it('credentials cached for another server URL or another token are not handed out', async () => {
    const u = user();
    const a = await creds(u.env);
    // The same server under another name is another cache entry.
    const other = await creds({ ...u.env, STATEHOUSE_SERVER: `http://localhost:${server.port}` });
    expect(other.AccessKeyId).not.toBe(a.AccessKeyId);
    const b = await creds({ ...u.env, STATEHOUSE_TOKEN: tokenB });
    expect(b.AccessKeyId).not.toBe(a.AccessKeyId);
    const sub = (c: Creds): unknown =>
      JSON.parse(Buffer.from(c.SessionToken.split('.')[1], 'base64url').toString()).sub;
    expect(sub(b)).toBe('svc:cache-b');
    // Each source keeps its own entry.
    expect((await creds(u.env)).AccessKeyId).toBe(a.AccessKeyId);
    expect((await creds({ ...u.env, STATEHOUSE_TOKEN: tokenB })).AccessKeyId).toBe(b.AccessKeyId);
  });

  it('--server and STATEHOUSE_SERVER name the same entry (the same URL rule as the full CLI)', async () => {
    const u = user();
    const first = await creds(u.env);
    const { STATEHOUSE_SERVER: _url, ...withoutServer } = u.env;
    expect(await creds(withoutServer, ['--server', `${server.url}/`])).toEqual(first);
    expect(await creds(withoutServer, [`--server=${server.url}`])).toEqual(first);
  });

  it('a cache file readable by others, corrupt or truncated is ignored: new credentials, no error', async () => {
    const u = user();
    const first = await creds(u.env);
    chmodSync(u.cacheFile, 0o644);
    const second = await creds(u.env);
    expect(second.AccessKeyId).not.toBe(first.AccessKeyId);
    expect(statSync(u.cacheFile).mode & 0o777).toBe(0o600);

    const text = readFileSync(u.cacheFile, 'utf8');
    writeFileSync(u.cacheFile, text.slice(0, text.length / 2));
    const third = await creds(u.env);
    expect(third.AccessKeyId).not.toBe(second.AccessKeyId);

    writeFileSync(u.cacheFile, '{"entries": [1, 2]}');
    expect((await creds(u.env)).AccessKeyId).not.toBe(third.AccessKeyId);
  });

  it('logout and login remove the cache', async () => {
    const u = user();
    await creds(u.env);
    expect((await statehouse(['logout'], u.env)).code).toBe(0);
    expect(existsSync(u.cacheFile)).toBe(false);

    const { STATEHOUSE_TOKEN: _token, ...stored } = u.env;
    expect((await statehouse(['login', '--token', tokenB], stored)).code).toBe(0);
    const b = await creds(stored);
    expect(existsSync(u.cacheFile)).toBe(true);
    expect((await creds(stored)).AccessKeyId).toBe(b.AccessKeyId);
    expect((await statehouse(['login', '--token', tokenA], stored)).code).toBe(0);
    expect(existsSync(u.cacheFile)).toBe(false);
    expect((await creds(stored)).AccessKeyId).not.toBe(b.AccessKeyId);
  });

  it('a warm `creds --json` loads no commander, Nest, TypeORM, reflect-metadata or command module', async () => {
    const u = user();
    const recorded = join(u.env.HOME, 'modules.txt');
    const env = {
      ...u.env,
      NODE_OPTIONS: `--require ${join(ROOT, 'test', 'support', 'record-modules.js')}`,
      RECORD_MODULES_TO: recorded,
    };
    const heavy = (modules: string[]): string[] =>
      modules.filter((m) =>
        /[\\/]node_modules[\\/](commander|@nestjs|typeorm|reflect-metadata)[\\/]|[\\/]dist[\\/]src[\\/](cli[\\/](commands[\\/]|program\.js)|server\.js|app\.module\.js)/.test(
          m,
        ),
      );
    // Cold: the full CLI runs (and the recorder sees it, so an empty list below means something).
    const cold = await creds(env);
    const coldModules = readFileSync(recorded, 'utf8').split('\n');
    expect(heavy(coldModules).some((m) => m.includes('commander'))).toBe(true);

    expect(await creds(env)).toEqual(cold);
    const warm = readFileSync(recorded, 'utf8').split('\n');
    expect(warm.some((m) => m.endsWith('creds-cache.js'))).toBe(true);
    expect(heavy(warm)).toEqual([]);
  });
});
