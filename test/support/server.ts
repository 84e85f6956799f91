import { ChildProcess, spawn } from 'node:child_process';
import { delimiter, dirname } from 'node:path';
import { freshServerEnv } from './database';
import { CLI, TEST_TOKEN } from './paths';
import { collectOutput, exitCode } from './processes';
import type { S3Creds } from './s3-signer';

export interface RunningServer {
  url: string;
  port: number;
  /** The S3 door's own listener (STATEHOUSE_S3_PORT), when it has one. */
  s3Port?: number;
  s3Url?: string;
  token: string;
  proc: ChildProcess;
  /** Everything the process wrote so far (stdout and stderr). */
  output: () => string;
  /** Graceful stop (SIGTERM), waiting for exit. */
  stop: () => Promise<void>;
  /** SIGKILL: a crash. */
  kill: () => Promise<void>;
  /** Bearer header for the bootstrap token. */
  auth: { Authorization: string };
}

/** The Node binary to run servers with (CI runs the suites on Node 20 and on Node 24). */
export const NODE = process.env.STATEHOUSE_TEST_NODE ?? process.execPath;

/**
 * The environment for a child process: the test's own without the server's settings
 * (STATEHOUSE_*, DATABASE_URL), with the Node under test first on the PATH (for `node` run by
 * npm scripts and `#!/usr/bin/env node`).
 */
export function childEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !k.startsWith('STATEHOUSE_') && k !== 'DATABASE_URL') env[k] = v;
  }
  env.PATH = `${dirname(NODE)}${delimiter}${env.PATH ?? ''}`;
  return env;
}

/**
 * Starts `statehouse serve` in its own process on a free port and waits until /readyz answers.
 * `env` is added to a minimal environment (no inherited STATEHOUSE_ settings).
 */
export async function spawnServer(
  env: Record<string, string>,
  options: { waitReady?: boolean; timeoutMs?: number } = {},
): Promise<RunningServer> {
  const proc = spawn(NODE, [CLI, 'serve'], {
    env: {
      ...childEnv(),
      NODE_ENV: 'production',
      PORT: '0',
      STATEHOUSE_HOST: '127.0.0.1',
      STATEHOUSE_BOOTSTRAP_TOKEN: TEST_TOKEN,
      STATEHOUSE_LOG_LEVEL: 'info',
      // A stop keeps answering new connections for the grace (2 s by default) even when idle:
      // tests that are about the drain set it themselves; the rest need not wait it out.
      STATEHOUSE_SHUTDOWN_GRACE: '0',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = collectOutput(proc);
  const exited = exitCode(proc);

  const timeoutMs = options.timeoutMs ?? 60_000;
  const deadline = Date.now() + timeoutMs;
  let port = 0;
  while (port === 0) {
    const m = /listening on https?:\/\/[^:]+:(\d+)/.exec(output());
    if (m) port = Number(m[1]);
    else if (proc.exitCode !== null)
      throw new Error(`server exited with ${proc.exitCode}:\n${output()}`);
    else if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`server did not start within ${timeoutMs} ms:\n${output()}`);
    } else await new Promise((r) => setTimeout(r, 50));
  }
  const scheme = env.STATEHOUSE_TLS_CERT_FILE ? 'https' : 'http';
  const url = `${scheme}://127.0.0.1:${port}`;
  if (options.waitReady !== false && scheme === 'http') {
    for (;;) {
      const r = await fetch(`${url}/readyz`).catch(() => undefined);
      if (r?.status === 200) break;
      if (Date.now() > deadline) throw new Error(`server never became ready:\n${output()}`);
      await new Promise((res) => setTimeout(res, 50));
    }
  }
  const token = env.STATEHOUSE_BOOTSTRAP_TOKEN ?? TEST_TOKEN;
  const s3 = /for S3 clients on https?:\/\/[^:\s]+:(\d+)/.exec(output());
  const s3Port = s3 ? Number(s3[1]) : undefined;
  return {
    url,
    port,
    s3Port,
    s3Url: s3Port === undefined ? undefined : `${scheme}://127.0.0.1:${s3Port}`,
    token,
    proc,
    output,
    auth: { Authorization: `Bearer ${token}` },
    stop: async () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      await exited;
    },
    kill: async () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
      await exited;
    },
  };
}

/** A request to the server's management API with the bootstrap token (headers may add more). */
export function apiFetch(
  server: Pick<RunningServer, 'url' | 'auth'>,
  path: string,
  init: RequestInit = {},
): Promise<Response> {
  return fetch(`${server.url}${path}`, {
    ...init,
    headers: { ...server.auth, ...(init.headers as Record<string, string> | undefined) },
  });
}

/**
 * The suite's server on a fresh database, with `extraEnv()` (read when it starts) added to its
 * environment: started before its tests and handed to `started`; stopped after them, and its
 * database removed.
 */
export function onFreshServer(
  started: (server: RunningServer) => void,
  extraEnv: () => Record<string, string> = () => ({}),
): void {
  let server: RunningServer | undefined;
  let cleanup: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    const fresh = await freshServerEnv();
    cleanup = fresh.cleanup;
    server = await spawnServer({ ...fresh.env, ...extraEnv() });
    started(server);
  });
  afterAll(async () => {
    await server?.stop();
    await cleanup?.();
  });
}

/**
 * Two servers on one fresh database (PostgreSQL: replicas), with `extraEnv()` added to their
 * environment, started at the same moment (they race to generate what the first start makes) and
 * handed to `started`; both stopped after the suite's tests, and the database removed.
 */
export function onFreshReplicas(
  extraEnv: () => Record<string, string>,
  started: (a: RunningServer, b: RunningServer) => void,
): void {
  let servers: RunningServer[] = [];
  let cleanup: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    const fresh = await freshServerEnv();
    cleanup = fresh.cleanup;
    const env = { ...fresh.env, ...extraEnv() };
    const [a, b] = await Promise.all([spawnServer(env), spawnServer(env)]);
    servers = [a, b];
    started(a, b);
  });
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    await cleanup?.();
  });
}

/** A JSON request to the management API, with `bearer` if given; the status and parsed body. */
export async function callJson(
  server: RunningServer,
  method: string,
  path: string,
  bearer?: string,
  body?: unknown,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: {
      ...(bearer ? { Authorization: `Bearer ${bearer}` } : {}),
      ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

/** The version numbers of `unit` (GET /v1/units/<unit>/versions), or 'no unit' on a 404. */
export async function unitVersions(
  server: RunningServer,
  unit: string,
): Promise<number[] | 'no unit'> {
  const r = await apiFetch(server, `/v1/units/${encodeURIComponent(unit)}/versions`);
  if (r.status === 404) return 'no unit';
  expect(r.status).toBe(200);
  return ((await r.json()) as { items: { version: number }[] }).items.map((v) => v.version);
}

const workspaceQuery = (workspace?: string): string => (workspace ? `?workspace=${workspace}` : '');

/** GET /v1/units/<unit>/<what> in `workspace` (the default one if none); asserts a 200. */
async function unitRead(
  server: RunningServer,
  unit: string,
  what: 'versions' | 'state',
  workspace?: string,
): Promise<Response> {
  const path = `/v1/units/${encodeURIComponent(unit)}/${what}${workspaceQuery(workspace)}`;
  const r = await apiFetch(server, path);
  expect(r.status).toBe(200);
  return r;
}

/** The version numbers of `unit` in `workspace` (the default one if none); asserts a 200. */
export async function versionNumbersOf(
  server: RunningServer,
  unit: string,
  workspace?: string,
): Promise<number[]> {
  const r = await unitRead(server, unit, 'versions', workspace);
  return ((await r.json()) as { items: { version: number }[] }).items.map((v) => v.version);
}

/** Asserts that the current state of `unit` in `workspace` (the default one if none) is `bytes`. */
export async function expectCurrentState(
  server: RunningServer,
  unit: string,
  bytes: string | Buffer,
  workspace?: string,
): Promise<void> {
  const r = await unitRead(server, unit, 'state', workspace);
  expect(Buffer.from(await r.arrayBuffer()).equals(Buffer.from(bytes))).toBe(true);
}

/** S3 credentials for `subject`: an API token made for it (as bootstrap-admin), exchanged. */
export async function s3CredentialsFor(server: RunningServer, subject: string): Promise<S3Creds> {
  const token = await apiFetch(server, '/v1/auth/tokens', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: subject, subject }),
  });
  expect(token.status).toBe(201);
  const secret = ((await token.json()) as { token: string }).token;
  const issued = await fetch(`${server.url}/v1/auth/issue-s3-creds`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${secret}` },
  });
  expect(issued.status).toBe(200);
  return (await issued.json()) as S3Creds;
}

/** Runs the CLI to completion and returns its exit code and output. */
export async function runCli(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; output: string }> {
  const proc = spawn(NODE, [CLI, ...args], {
    env: { ...childEnv(), NODE_ENV: 'production', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = collectOutput(proc);
  const code = await exitCode(proc);
  return { code, output: output() };
}
