/**
 * Stopping on SIGTERM and SIGINT, whichever way the server was started:
 *
 *  - `npm start` (npm runs the script through `sh -c`; the script `exec`s node, which runs the
 *    CLI in its own process): a signal to npm reaches the server; within 10 s every process of
 *    npm's process group is gone, the port is free, and npm exits 143 (SIGTERM) or 130 (SIGINT),
 *    the server's own status after a clean stop. `npm start -- <command>` runs that command.
 *  - `statehouse serve`: a request in flight when SIGTERM arrives is finished (its state is
 *    stored) while new connections are refused (after the grace), then the process exits 143; a request that is
 *    still unfinished after STATEHOUSE_SHUTDOWN_TIMEOUT makes the exit status 1; the same
 *    signal twice at once is one stop, a third one a second later exits at once (1).
 * The installed package's `statehouse serve` is stopped the same way in package.spec.ts.
 */
import { readFileSync } from 'node:fs';
import { ClientRequest, IncomingMessage, request } from 'node:http';
import { join } from 'node:path';
import { freshServerEnv } from '../support/database';
import { FIXTURES, ROOT, TEST_TOKEN } from '../support/paths';
import {
  eventually,
  groupAlive,
  listeningPort,
  portIsFree,
  spawnGroup,
} from '../support/processes';
import { childEnv, runCli, spawnServer } from '../support/server';

jest.setTimeout(180_000);

const SIMPLE = readFileSync(join(FIXTURES, 'simple.tfstate'));
const VERSION = (
  JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }
).version;

describe('stopping on a signal', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c();
  });
  const fresh = async () => {
    const f = await freshServerEnv();
    cleanups.push(f.cleanup);
    return f;
  };

  /** `npm start` in the repository, in a process group of its own. */
  async function npmStart(args: string[] = [], extraEnv: Record<string, string> = {}) {
    const { env } = await fresh();
    const npm = spawnGroup('npm', ['start', ...(args.length > 0 ? ['--', ...args] : [])], {
      cwd: ROOT,
      env: {
        ...childEnv(),
        NODE_ENV: 'production',
        PORT: '0',
        STATEHOUSE_HOST: '127.0.0.1',
        STATEHOUSE_BOOTSTRAP_TOKEN: TEST_TOKEN,
        ...env,
        ...extraEnv,
      },
    });
    cleanups.push(npm.killGroup);
    return npm;
  }

  it.each([
    ['SIGTERM', 143],
    ['SIGINT', 130],
  ] as const)(
    '%s to `npm start`: the server stops cleanly, every process is gone and the port is free within 10 s; npm exits %i',
    async (signal, status) => {
      const npm = await npmStart();
      const port = await listeningPort(npm.output, () => npm.proc.exitCode !== null);
      expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);

      const sent = Date.now();
      process.kill(npm.pgid, signal); // npm itself, as `kill <pid of npm start>` does
      const gone = await eventually(
        async () => !groupAlive(npm.pgid) && (await portIsFree(port)),
        10_000,
      );
      expect({ gone, output: npm.output() }).toMatchObject({ gone: true });
      expect(Date.now() - sent).toBeLessThan(10_000);
      expect(await npm.exited).toEqual({ code: status, signal: null });
      expect(npm.output()).toContain(`${signal}: stopping`);
      expect(npm.output()).toContain('stopped cleanly');
    },
  );

  it('`npm start -- <command>` runs that command, not serve', async () => {
    const version = await npmStart(['--version']);
    expect((await version.exited).code).toBe(0);
    expect(version.output().trim().split('\n').pop()).toBe(VERSION);

    const server = await spawnServer((await fresh()).env);
    cleanups.push(server.stop);
    const whoami = await npmStart(['whoami', '--json', '--server', server.url], {
      STATEHOUSE_TOKEN: TEST_TOKEN,
    });
    expect((await whoami.exited).code).toBe(0);
    expect(whoami.output()).toContain('"subject": "bootstrap-admin"');
    expect(whoami.output()).not.toMatch(/listening on/);
  });

  /** A PUT of a state whose body is sent in two halves, the second when the test says. */
  function slowPut(url: string, unit: string) {
    const half = Math.floor(SIMPLE.length / 2);
    const req: ClientRequest = request(`${url}/v1/units/${encodeURIComponent(unit)}/state`, {
      method: 'PUT',
      agent: false,
      headers: { Authorization: `Bearer ${TEST_TOKEN}`, 'Content-Length': SIMPLE.length },
    });
    const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
      req.on('response', (res: IncomingMessage) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', reject);
    });
    req.write(SIMPLE.subarray(0, half));
    return { answer, finish: () => req.end(SIMPLE.subarray(half)) };
  }

  it('SIGTERM to `statehouse serve` finishes the request in flight (stored), refuses new connections, exits 143', async () => {
    const { env } = await fresh();
    const server = await spawnServer(env);
    cleanups.push(server.stop);
    const unit = 'signals/in-flight';
    const put = slowPut(server.url, unit);
    // The server has the request (its first half) before the signal.
    await new Promise((r) => setTimeout(r, 500));
    const exited = new Promise<number | null>((r) => server.proc.once('exit', (c) => r(c)));
    server.proc.kill('SIGTERM');
    expect(await eventually(() => server.output().includes('SIGTERM: stopping'), 10_000)).toBe(
      true,
    );
    expect(server.output()).toContain('1 request(s) in flight');
    // No new connections while the request is finished, once the grace is over
    // (STATEHOUSE_SHUTDOWN_GRACE, 2 s; shutdown.spec.ts shows what is answered within it).
    expect(await eventually(() => portIsFree(server.port), 10_000)).toBe(true);
    await expect(fetch(`${server.url}/healthz`)).rejects.toThrow();

    put.finish();
    expect(await put.answer).toMatchObject({ status: 200 });
    expect(await exited).toBe(143);
    expect(server.output()).toContain('stopped cleanly');

    // It was stored: a new server on the same database has it as version 1.
    const again = await spawnServer(env);
    cleanups.push(again.stop);
    const state = await fetch(`${again.url}/v1/units/${encodeURIComponent(unit)}/state`, {
      headers: again.auth,
    });
    expect(state.status).toBe(200);
    expect(Buffer.from(await state.arrayBuffer()).equals(SIMPLE)).toBe(true);
  });

  it('a request still unfinished after STATEHOUSE_SHUTDOWN_TIMEOUT: the stop is not clean, exit status 1', async () => {
    const { env } = await fresh();
    const server = await spawnServer({ ...env, STATEHOUSE_SHUTDOWN_TIMEOUT: '1s' });
    cleanups.push(server.stop);
    const put = slowPut(server.url, 'signals/stuck');
    put.answer.catch(() => undefined); // its connection is closed under it
    await new Promise((r) => setTimeout(r, 500));
    const exited = new Promise<number | null>((r) => server.proc.once('exit', (c) => r(c)));
    const sent = Date.now();
    server.proc.kill('SIGTERM');
    expect(await exited).toBe(1);
    expect(Date.now() - sent).toBeLessThan(10_000);
    expect(server.output()).toMatch(
      /requests still in flight after 1 s \(STATEHOUSE_SHUTDOWN_TIMEOUT\)/,
    );
    expect(server.output()).not.toContain('stopped cleanly');
    expect(await portIsFree(server.port)).toBe(true);
  });

  it('the same signal twice at once (npm and the terminal both pass Ctrl-C on) is one stop; once more a second later exits at once (1)', async () => {
    const { env } = await fresh();
    const server = await spawnServer({ ...env, STATEHOUSE_SHUTDOWN_TIMEOUT: '60s' });
    cleanups.push(server.stop);
    const put = slowPut(server.url, 'signals/twice');
    put.answer.catch(() => undefined); // its connection is closed under it
    await new Promise((r) => setTimeout(r, 500));
    const exited = new Promise<number | null>((r) => server.proc.once('exit', (c) => r(c)));
    server.proc.kill('SIGINT');
    server.proc.kill('SIGINT');
    await new Promise((r) => setTimeout(r, 1500));
    expect(server.proc.exitCode).toBeNull(); // still finishing the request in flight
    expect(server.output().match(/SIGINT: stopping/g)).toHaveLength(1);

    const sent = Date.now();
    server.proc.kill('SIGINT');
    expect(await exited).toBe(1);
    expect(Date.now() - sent).toBeLessThan(5_000);
    expect(server.output()).toContain('SIGINT again: exiting now, without finishing');
  });

  it('a bad STATEHOUSE_SHUTDOWN_TIMEOUT stops the start (exit 2, naming it)', async () => {
    const { env } = await fresh();
    const r = await runCli(['serve'], { ...env, STATEHOUSE_SHUTDOWN_TIMEOUT: 'soon' });
    expect(r.code).toBe(2);
    expect(r.output).toContain('STATEHOUSE_SHUTDOWN_TIMEOUT');
  });
});
