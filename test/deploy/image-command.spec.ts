/**
 * The image's own command, run without a container engine: /app is laid out the way the final
 * stage's COPY lines lay it out — package.json and the lock file, node_modules from the stage
 * that runs `npm ci --omit=dev` (run here, into a temporary directory outside the repository so
 * no dev dependency can be found by walking up), the compiled dist — and the ENTRYPOINT + CMD,
 * ENV, WORKDIR and HEALTHCHECK are read from docker/Dockerfile itself, so the test and the image
 * cannot drift apart. It proves the server starts on production dependencies only, that tini
 * passes SIGTERM on and the container exits 0 after the server's clean stop (`tini -e 143`) but
 * 1 after a stop that was not clean or a migrations run cut short, and that the health check
 * answers over plain http and over TLS.
 *
 * Needs `tini` where the ENTRYPOINT names it (CI installs Debian's package) and the npm registry
 * (or npm's cache) for `npm ci`.
 */
import { ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { get as httpGet, request as httpRequest } from 'node:http';
import { get as httpsGet } from 'node:https';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { ROOT, TEST_TOKEN } from '../support/paths';
import { selfSignedCertificate } from '../support/tls';
import { NODE } from '../support/server';
import { finalImage, parseStages } from './support/dockerfile-rules';

jest.setTimeout(600_000);

const DOCKERFILE = readFileSync(join(ROOT, 'docker', 'Dockerfile'), 'utf8');
const image = finalImage(DOCKERFILE);
const stages = parseStages(DOCKERFILE);
const WORKDIR = image.workdir ?? '/';

function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => res(port));
    });
  });
}

/** Pids whose parent is `pid` (Linux /proc). */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // "pid (comm) state ppid …": comm may hold spaces, so read after the last ')'.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid)
        out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** Runs the `npm …` RUN lines of a stage (its apt-get lines are the host's business) in `dir`. */
async function runNpmSteps(stageName: string, dir: string): Promise<void> {
  const stage = stages.find((s) => s.name === stageName);
  if (!stage) throw new Error(`docker/Dockerfile has no stage ${stageName}`);
  for (const i of stage.instructions) {
    if (i.getKeyword() === 'COPY') {
      const args = i.getArguments().map((a) => a.getValue());
      for (const src of args.slice(0, -1)) cpSync(join(ROOT, src), join(dir, src));
    }
  }
  const runs = stage.instructions
    .filter((i) => i.getKeyword() === 'RUN')
    .map((i) => i.getArguments().map((a) => a.getValue()));
  const npmRuns = runs.filter((r) => r[0] === 'npm');
  expect(npmRuns.length).toBeGreaterThan(0);
  for (const [, ...args] of npmRuns) {
    await new Promise<void>((res, rej) =>
      execFile('npm', args, { cwd: dir, maxBuffer: 64 * 1024 * 1024 }, (err, _o, stderr) =>
        err ? rej(new Error(`npm ${args.join(' ')} failed: ${stderr}`)) : res(),
      ),
    );
  }
}

/** The final stage's /app, built from its COPY lines. Returns the directory standing for /app. */
async function layOutApp(root: string): Promise<string> {
  const app = join(root, 'app');
  mkdirSync(app, { recursive: true });
  for (const c of image.copies) {
    const dest = resolve(app, c.dest);
    if (c.from === undefined) {
      for (const src of c.sources) cpSync(join(ROOT, src), join(dest, src));
    } else if (c.from === 'build' && c.sources.length === 1 && c.sources[0] === `${WORKDIR}/dist`) {
      // The build stage's `npm ci && npm run build` is what Jest's global setup did to dist/.
      cpSync(join(ROOT, 'dist'), dest, {
        recursive: true,
        filter: (p) => !relative(join(ROOT, 'dist'), p).startsWith('.'),
      });
    } else if (c.sources.length === 1 && c.sources[0] === `${WORKDIR}/node_modules`) {
      const stageDir = join(root, `stage-${c.from}`);
      mkdirSync(stageDir);
      await runNpmSteps(c.from, stageDir);
      renameSync(join(stageDir, 'node_modules'), dest);
    } else {
      throw new Error(
        `the final stage copies ${c.sources.join(' ')} from ${c.from}: teach this test to lay that out`,
      );
    }
  }
  return app;
}

interface Running {
  proc: ChildProcess;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

describe('the image command on a production-only node_modules', () => {
  let root: string;
  let app: string;
  let bin: string;
  const running: Running[] = [];

  /** The container's environment: the image's ENV, then the test's own settings. */
  function containerEnv(extra: Record<string, string>): Record<string, string> {
    return { PATH: `${bin}:/usr/bin:/bin`, HOME: root, ...image.env, ...extra };
  }

  /** ENTRYPOINT + CMD (or the arguments given instead of CMD, as `docker run IMAGE …` does). */
  function start(env: Record<string, string>, args: string[] = image.cmd ?? []): Running {
    const command = [...(image.entrypoint ?? []), ...args];
    const proc = spawn(command[0], command.slice(1), {
      cwd: app,
      env: containerEnv(env),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    proc.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    proc.stderr?.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
      proc.once('exit', (code, signal) => r({ code, signal })),
    );
    const r = { proc, output: () => out, exited };
    running.push(r);
    return r;
  }

  async function untilHealthy(r: Running, url: string, init?: { insecure: boolean }) {
    const deadline = Date.now() + 120_000;
    for (;;) {
      if (r.proc.exitCode !== null) throw new Error(`the server exited:\n${r.output()}`);
      const ok = await new Promise<boolean>((res) => {
        const get = url.startsWith('https:') ? httpsGet : httpGet;
        get(url, { rejectUnauthorized: !init?.insecure, timeout: 2000 }, (answer) => {
          answer.resume();
          res(answer.statusCode === 200);
        })
          .once('error', () => res(false))
          .once('timeout', function (this: { destroy(): void }) {
            this.destroy();
          });
      });
      if (ok) return;
      if (Date.now() > deadline) throw new Error(`no 200 from ${url}:\n${r.output()}`);
      await new Promise((res) => setTimeout(res, 250));
    }
  }

  /** The image's HEALTHCHECK command, as Docker runs it: in the container, within --timeout. */
  function healthcheck(env: Record<string, string>): Promise<{ code: number; output: string }> {
    const command = image.healthcheck?.command ?? [];
    const timeout =
      1000 * Number(/^(\d+)s$/.exec(image.healthcheck?.flags.timeout ?? '')?.[1] ?? 30);
    return new Promise((res) => {
      const child = execFile(
        command[0],
        command.slice(1),
        { cwd: app, env: containerEnv(env), timeout, killSignal: 'SIGKILL' },
        (e, stdout) => {
          const code = (e as { code?: unknown } | null)?.code;
          res({ code: e ? (typeof code === 'number' ? code : 1) : 0, output: stdout.trim() });
        },
      );
      child.stdin?.end(); // as under Docker: no terminal, nothing to read
    });
  }

  beforeAll(async () => {
    const init = image.entrypoint?.[0] ?? '';
    if (init.startsWith('/') && !existsSync(init)) {
      throw new Error(
        `${init} (the image's init, from its ENTRYPOINT) is not installed here: apt-get install tini`,
      );
    }
    // Outside the repository, so nothing resolves into the repository's own node_modules.
    root = mkdtempSync(join(tmpdir(), 'statehouse-image-'));
    bin = join(root, 'bin');
    mkdirSync(bin);
    symlinkSync(NODE, join(bin, 'node')); // the `node` on the image's PATH
    app = await layOutApp(root);
  });

  afterAll(async () => {
    for (const r of running) {
      if (r.proc.exitCode !== null || r.proc.signalCode !== null || !r.proc.pid) continue;
      // tini runs the server in a process group of its own and cannot pass SIGKILL on: end the
      // server first, then tini.
      for (const child of childrenOf(r.proc.pid)) process.kill(child, 'SIGKILL');
      r.proc.kill('SIGKILL');
      await r.exited;
    }
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it('holds production dependencies only', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
      devDependencies: Record<string, string>;
    };
    for (const dep of Object.keys(pkg.dependencies)) {
      expect(existsSync(join(app, 'node_modules', dep, 'package.json'))).toBe(true);
    }
    // Node's own resolution from /app (walking up the directories) finds none of them.
    const devs = ['typescript', 'jest', 'ts-jest', 'eslint', '@nestjs/testing'];
    for (const dev of devs) expect(existsSync(join(app, 'node_modules', dev))).toBe(false);
    const found = execFileSync(
      NODE,
      [
        '-e',
        'for (const d of process.argv.slice(1)) { try { require.resolve(d); console.log(d); } catch {} }',
        ...devs,
      ],
      { cwd: app, env: containerEnv({}), encoding: 'utf8' },
    );
    expect(found).toBe('');
  });

  it('starts from ENTRYPOINT + CMD, answers /healthz, passes the health check, and stops on SIGTERM through tini', async () => {
    const port = await freePort();
    const data = join(root, 'data-plain');
    const env = { PORT: String(port), STATEHOUSE_HOST: '127.0.0.1', STATEHOUSE_DATA_DIR: data };
    const server = start(env);
    await untilHealthy(server, `http://127.0.0.1:${port}/healthz`);
    expect(await healthcheck(env)).toEqual({
      code: 0,
      output: `healthy: http://127.0.0.1:${port}/healthz answered 200`,
    });

    const stopped = Date.now();
    server.proc.kill('SIGTERM'); // to tini, PID 1 of the container
    const { code, signal } = await server.exited;
    // tini hands the signal to the server, which stops cleanly and exits 143; tini reports that
    // as 0 (-e 143); it is never itself killed by the signal.
    expect({ code, signal }).toEqual({ code: 0, signal: null });
    expect(server.output()).toMatch(/stopped cleanly/);
    expect(Date.now() - stopped).toBeLessThan(30_000);
    expect(await healthcheck(env)).toMatchObject({ code: 1 });
  });

  it('a stop that is not clean stays 1 through tini: a request cut off at STATEHOUSE_SHUTDOWN_TIMEOUT', async () => {
    const port = await freePort();
    const env = {
      PORT: String(port),
      STATEHOUSE_HOST: '127.0.0.1',
      STATEHOUSE_DATA_DIR: join(root, 'data-cut'),
      STATEHOUSE_SHUTDOWN_TIMEOUT: '1s',
      STATEHOUSE_BOOTSTRAP_TOKEN: TEST_TOKEN,
    };
    const server = start(env);
    await untilHealthy(server, `http://127.0.0.1:${port}/healthz`);
    // A request whose body never ends: still in flight when the timeout comes.
    const stuck = httpRequest({
      host: '127.0.0.1',
      port,
      method: 'POST',
      path: '/v1/backend/image/stuck',
      headers: { authorization: `Bearer ${TEST_TOKEN}`, 'content-length': '1000' },
      agent: false,
    });
    stuck.on('error', () => undefined);
    stuck.write('{');
    await new Promise((r) => setTimeout(r, 500));
    server.proc.kill('SIGTERM');
    expect(await server.exited).toEqual({ code: 1, signal: null });
    expect(server.output()).toMatch(/requests still in flight after 1 s/);
  });

  it('`migrate` cut short by SIGTERM exits 1 through tini, not a clean 0', async () => {
    // A fresh embedded database: creating it takes seconds, so the signal comes while the
    // command is at it (its data dir has begun to fill).
    const data = join(root, 'data-migrate');
    const run = start({ STATEHOUSE_DATA_DIR: data }, ['migrate']);
    const deadline = Date.now() + 60_000;
    while (!(existsSync(data) && readdirSync(data).length > 0) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(run.proc.exitCode).toBeNull();
    run.proc.kill('SIGTERM');
    expect(await run.exited).toEqual({ code: 1, signal: null });
    expect(run.output()).toContain('statehouse: SIGTERM before the command was done (exit 1)');
  });

  it('passes the health check over TLS, pinning the configured certificate', async () => {
    const port = await freePort();
    const certDir = join(root, 'tls');
    mkdirSync(certDir);
    const cert = (name: string) => selfSignedCertificate(certDir, name, 'statehouse.example.com');
    const own = cert('own');
    const env = {
      PORT: String(port),
      STATEHOUSE_HOST: '127.0.0.1',
      STATEHOUSE_DATA_DIR: join(root, 'data-tls'),
      STATEHOUSE_TLS_CERT_FILE: own.cert,
      STATEHOUSE_TLS_KEY_FILE: own.key,
    };
    const server = start(env);
    await untilHealthy(server, `https://127.0.0.1:${port}/healthz`, { insecure: true });
    expect(await healthcheck(env)).toEqual({
      code: 0,
      output: `healthy: https://127.0.0.1:${port}/healthz answered 200`,
    });
    // Another certificate configured for the probe than the one served: not this server.
    const other = cert('other');
    expect(
      await healthcheck({
        ...env,
        STATEHOUSE_TLS_CERT_FILE: other.cert,
        STATEHOUSE_TLS_KEY_FILE: other.key,
      }),
    ).toEqual({
      code: 1,
      output: `unhealthy: https://127.0.0.1:${port}/healthz: the server did not present the configured certificate`,
    });
    server.proc.kill('SIGTERM');
    await server.exited;
  });
});
