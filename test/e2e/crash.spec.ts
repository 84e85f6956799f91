/**
 * Crash safety of the whole process: the server is SIGKILLed (`server.kill()`) while a large
 * state is being uploaded through the Terraform HTTP backend door, then restarted on the same
 * data dir (embedded) or the same DATABASE_URL (PostgreSQL).
 *
 *  - killed midway through a slow 30 MB upload: after the restart `/readyz` is 200, the current
 *    state is still version 1 byte for byte, the version list holds only version 1, and a
 *    normal write works;
 *  - killed the moment the whole body has been sent, before the answer is read: after the
 *    restart the current state is byte for byte either the previous version or the new one
 *    (the new one whenever a 200 did arrive), never anything else, and it reads back whole —
 *    repeated for a small, a medium and a 30 MB body;
 *  - (embedded only) a second server on a data dir whose embedded database a live server holds
 *    exits non-zero saying in one line that the data directory is in use, and the first server
 *    is unharmed — also when the pid recorded in the data dir names no process here (a server in
 *    another container, whose PID namespace repeats numbers): an OS lock decides, not a pid.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { freshServerEnv, ON_POSTGRES } from '../support/database';
import { sha256Hex } from '../support/hashes';
import { CLI, TEST_TOKEN } from '../support/paths';
import { sleep } from '../support/processes';
import { NODE, RunningServer, spawnServer } from '../support/server';

jest.setTimeout(120_000);

const MiB = 1024 * 1024;

/** A valid Terraform v4 state whose `big` output is a string of about `padding` bytes. */
function bigState(serial: number, lineage: string, padding: number): Buffer {
  const head = Buffer.from(
    `{\n  "version": 4,\n  "terraform_version": "1.11.4",\n  "serial": ${serial},\n` +
      `  "lineage": "${lineage}",\n  "outputs": {\n    "big": {\n      "value": "`,
  );
  const filler = Buffer.alloc(padding);
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
  let x = serial * 2654435761 + padding;
  for (let i = 0; i < padding; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    filler[i] = alphabet.charCodeAt((x >>> 16) % alphabet.length);
  }
  const tail = Buffer.from(
    `",\n      "type": "string"\n    }\n  },\n  "resources": [],\n  "check_results": null\n}\n`,
  );
  return Buffer.concat([head, filler, tail]);
}

describe('crash safety: SIGKILL during a state upload', () => {
  let env: Record<string, string>;
  let cleanup: (() => Promise<void>) | undefined;
  const servers: RunningServer[] = [];

  async function start(): Promise<RunningServer> {
    const s = await spawnServer(env);
    servers.push(s);
    return s;
  }

  function path(unit: string): string {
    return `/v1/backend/${unit}`;
  }

  async function post(s: RunningServer, unit: string, body: Buffer): Promise<Response> {
    return fetch(`${s.url}${path(unit)}`, {
      method: 'POST',
      headers: { ...s.auth, 'Content-Type': 'application/json' },
      body,
    });
  }

  async function current(s: RunningServer, unit: string): Promise<Buffer> {
    const r = await fetch(`${s.url}${path(unit)}`, { headers: s.auth });
    expect(r.status).toBe(200);
    const bytes = Buffer.from(await r.arrayBuffer());
    expect(Number(r.headers.get('content-length'))).toBe(bytes.length);
    return bytes;
  }

  async function versions(
    s: RunningServer,
    unit: string,
  ): Promise<{ version: number; serial: number; sha256: string; size: number }[]> {
    const r = await fetch(`${s.url}/v1/units/${encodeURIComponent(unit)}/versions`, {
      headers: s.auth,
    });
    expect(r.status).toBe(200);
    const page = (await r.json()) as {
      items: { version: number; serial: number; sha256: string; size: number }[];
    };
    return [...page.items].sort((p, q) => p.version - q.version);
  }

  /** Opens a POST of `size` bytes to the backend door; the caller writes the body. */
  function openUpload(s: RunningServer, unit: string, size: number) {
    const req = request(`${s.url}${path(unit)}`, {
      method: 'POST',
      headers: {
        ...s.auth,
        'Content-Type': 'application/json',
        'Content-Length': String(size),
      },
    });
    const outcome = new Promise<{ status?: number; error?: string }>((resolve) => {
      req.once('response', (res) => {
        res.resume();
        resolve({ status: res.statusCode });
      });
      req.once('error', (e) => resolve({ error: e.message }));
      req.once('close', () => resolve({ error: 'closed without an answer' }));
    });
    return { req, outcome };
  }

  beforeEach(async () => {
    const fresh = await freshServerEnv();
    env = fresh.env;
    cleanup = fresh.cleanup;
  });

  afterEach(async () => {
    for (const s of servers.splice(0)) await s.kill();
    await cleanup?.();
    cleanup = undefined;
  });

  it('killed midway through a slow 30 MB upload: version 1 stays current, byte for byte, and nothing else is recorded', async () => {
    const unit = `crash/midway-${randomUUID().slice(0, 8)}`;
    const lineage = randomUUID();
    const v1 = bigState(1, lineage, 4 * 1024);
    let s = await start();
    expect((await post(s, unit, v1)).status).toBe(200);

    const big = bigState(2, lineage, 30 * MiB);
    const upload = openUpload(s, unit, big.length);
    const chunk = 512 * 1024;
    let sent = 0;
    let killedAt = -1;
    while (sent < big.length) {
      const piece = big.subarray(sent, Math.min(sent + chunk, big.length));
      const flushed = writeChunk(upload.req, piece);
      sent += piece.length;
      await Promise.race([flushed, sleep(2_000)]);
      await sleep(15);
      if (sent >= big.length / 2) {
        killedAt = sent;
        await s.kill(); // SIGKILL while the body is still arriving
        break;
      }
    }
    expect(killedAt).toBeGreaterThan(0);
    expect(killedAt).toBeLessThan(big.length);
    upload.req.destroy();
    const outcome = await upload.outcome;
    expect(outcome.status).toBeUndefined(); // no answer was ever given

    s = await start();
    expect((await fetch(`${s.url}/readyz`)).status).toBe(200);
    const now = await current(s, unit);
    expect(now.length).toBe(v1.length);
    expect(now.equals(v1)).toBe(true);
    const listed = await versions(s, unit);
    expect(listed.map((v) => [v.version, v.serial, v.sha256])).toEqual([[1, 1, sha256Hex(v1)]]);
    const viaApi = await fetch(`${s.url}/v1/units/${encodeURIComponent(unit)}/state`, {
      headers: s.auth,
    });
    expect(Buffer.from(await viaApi.arrayBuffer()).equals(v1)).toBe(true);

    if (!ON_POSTGRES) {
      // Not a promise of the product, only reported: what the killed upload left on disk.
      const tmp = join(env.STATEHOUSE_DATA_DIR, 'blobs', '.tmp');
      const left = existsSync(tmp) ? readdirSync(tmp).filter((f) => f.endsWith('.part')) : [];
      const bytes = left.reduce((n, f) => n + statSync(join(tmp, f)).size, 0);
      console.log(
        `after the crash: ${left.length} partial upload file(s), ${bytes} bytes, in ${tmp}`,
      );
    }

    // A normal write works after the restart.
    const v2 = bigState(2, lineage, 8 * 1024);
    const w = await post(s, unit, v2);
    expect(w.status).toBe(200);
    expect((await current(s, unit)).equals(v2)).toBe(true);
    expect((await versions(s, unit)).map((v) => [v.version, v.serial])).toEqual([
      [1, 1],
      [2, 2],
    ]);
  });

  /**
   * Sends `body` whole and SIGKILLs the server either the moment the body is flushed to the
   * socket (`sent`, before any answer is read) or the moment the answer's head arrives
   * (`answered`); restarts it and checks that the current state is, byte for byte, the
   * previous one or the new one (the new one when a 200 arrived), with a consistent history.
   * Returns the state that is current afterwards.
   */
  async function crashDuringWrite(
    unit: string,
    previous: Buffer,
    next: Buffer,
    serial: number,
    killOn: 'sent' | 'answered',
  ): Promise<{ current: Buffer; report: string }> {
    const dying = servers[servers.length - 1];
    const before = await versions(dying, unit);
    const upload = openUpload(dying, unit, next.length);
    if (killOn === 'answered') upload.req.once('response', () => dying.proc.kill('SIGKILL'));
    await new Promise<void>((resolve) => {
      upload.req.end(next, () => {
        if (killOn === 'sent') dying.proc.kill('SIGKILL');
        resolve();
      });
    });
    if (killOn === 'answered') await upload.outcome;
    await dying.kill();
    const outcome = await upload.outcome;

    const s = await start();
    expect((await fetch(`${s.url}/readyz`)).status).toBe(200);
    const now = await current(s, unit);
    const isPrevious = now.equals(previous);
    const isNext = now.equals(next);
    const report =
      `${killOn}, ${next.length} bytes: answer ${outcome.status ?? outcome.error}, ` +
      `current = ${isNext ? 'new' : isPrevious ? 'previous' : 'NEITHER'}`;
    expect({ report, size: now.length, sha256: sha256Hex(now) }).toEqual({
      report: expect.not.stringContaining('NEITHER'),
      size: isNext ? next.length : previous.length,
      sha256: sha256Hex(isNext ? next : previous),
    });
    // An accepted write is never lost.
    if (outcome.status === 200) expect(report).toMatch(/current = new$/);

    const listed = await versions(s, unit);
    const last = listed[listed.length - 1];
    expect(listed.map((v) => v.version)).toEqual(listed.map((_, i) => i + 1));
    expect(listed.length).toBe(before.length + (isNext ? 1 : 0));
    expect(last.sha256).toBe(sha256Hex(now));
    expect(last.size).toBe(now.length);
    expect(last.serial).toBe(isNext ? serial : serial - 1);
    // Reading the version itself works too.
    const r = await fetch(
      `${s.url}/v1/units/${encodeURIComponent(unit)}/versions/${last.version}`,
      { headers: s.auth },
    );
    expect(r.status).toBe(200);
    expect(Buffer.from(await r.arrayBuffer()).equals(now)).toBe(true);
    return { current: now, report };
  }

  async function crashSeries(
    cases: { padding: number; killOn: 'sent' | 'answered' }[],
  ): Promise<string[]> {
    const unit = `crash/series-${randomUUID().slice(0, 8)}`;
    const lineage = randomUUID();
    let previous = bigState(1, lineage, 4 * 1024);
    let serial = 1;
    const s = await start();
    expect((await post(s, unit, previous)).status).toBe(200);
    const reports: string[] = [];
    for (const { padding, killOn } of cases) {
      const next = bigState(serial + 1, lineage, padding);
      const { current: now, report } = await crashDuringWrite(
        unit,
        previous,
        next,
        serial + 1,
        killOn,
      );
      reports.push(report);
      if (now.equals(next)) serial += 1;
      previous = now;
    }
    // And the next ordinary write goes through.
    const latest = servers[servers.length - 1];
    const after = bigState(serial + 1, lineage, 1024);
    expect((await post(latest, unit, after)).status).toBe(200);
    expect((await current(latest, unit)).equals(after)).toBe(true);
    console.log(`${ON_POSTGRES ? 'PostgreSQL' : 'embedded'}:\n  ${reports.join('\n  ')}`);
    return reports;
  }

  it('killed right after the whole body is sent: the current state is the previous or the new version, byte for byte, never anything else', async () => {
    await crashSeries([
      { padding: 16 * 1024, killOn: 'sent' },
      { padding: 2 * MiB, killOn: 'sent' },
      { padding: 30 * MiB, killOn: 'sent' },
    ]);
  });

  it('killed the moment a 200 arrives: the accepted write survives the crash', async () => {
    const reports = await crashSeries([
      { padding: 16 * 1024, killOn: 'answered' },
      { padding: 2 * MiB, killOn: 'answered' },
    ]);
    for (const r of reports) expect(r).toMatch(/answer 200, current = new$/);
  });

  /** Starts a second `serve` on the first server's data dir; resolves with its exit code and output. */
  async function secondServerOnSameDataDir(): Promise<{ code: number | null; output: string }> {
    const second = spawn(NODE, [CLI, 'serve'], {
      env: {
        ...childEnv(),
        NODE_ENV: 'production',
        PORT: '0',
        STATEHOUSE_HOST: '127.0.0.1',
        STATEHOUSE_BOOTSTRAP_TOKEN: TEST_TOKEN,
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    second.stdout.on('data', (d: Buffer) => (output += d.toString()));
    second.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const timer = setTimeout(() => second.kill('SIGKILL'), 60_000);
    const code = await new Promise<number | null>((r) => second.once('exit', (c) => r(c)));
    clearTimeout(timer);
    return { code, output };
  }

  async function expectSecondServerRefused(first: RunningServer, unit: string, state: Buffer) {
    const { code, output } = await secondServerOnSameDataDir();
    expect({ code, output }).toMatchObject({ code: expect.any(Number) });
    expect(code).not.toBe(0);
    // One line says why, naming the directory and what to do instead.
    expect(output).toMatch(
      /the data directory \S+ is in use by another Statehouse process \(pid \d+ on host [^)]+\): the embedded database serves one process — use DATABASE_URL for several replicas/,
    );
    expect(output).not.toMatch(/listening on/);
    expect(output).not.toMatch(/^\s+at /m); // no stack trace for an operator's situation

    // The first server is unharmed.
    expect((await fetch(`${first.url}/readyz`)).status).toBe(200);
    expect((await current(first, unit)).equals(state)).toBe(true);
    expect(first.proc.exitCode).toBeNull();
  }

  (ON_POSTGRES ? it.skip : it)(
    'a second server on a data dir held by a live server exits non-zero saying the data directory is in use (embedded only)',
    async () => {
      const unit = `crash/in-use-${randomUUID().slice(0, 8)}`;
      const first = await start();
      const state = bigState(1, randomUUID(), 1024);
      expect((await post(first, unit, state)).status).toBe(200);
      await expectSecondServerRefused(first, unit, state);
    },
  );

  (ON_POSTGRES ? it.skip : it)(
    'a second server is refused even when the pid written in the data dir means nothing here, as from another container (embedded only)',
    async () => {
      const unit = `crash/in-use-ns-${randomUUID().slice(0, 8)}`;
      const first = await start();
      const state = bigState(1, randomUUID(), 1024);
      expect((await post(first, unit, state)).status).toBe(200);
      // A server in another container (another PID namespace) on the same volume records a pid
      // that, seen from here, is no live process: a pid that has just exited stands for it.
      const gone = spawn(NODE, ['-e', '']);
      await new Promise((r) => gone.once('exit', r));
      const dir = env.STATEHOUSE_DATA_DIR;
      const files = readdirSync(dir);
      // Each file written the way that other server would write it (a pid file before the OS
      // lock, the lock's holder note now).
      if (files.includes('statehouse.pid'))
        writeFileSync(join(dir, 'statehouse.pid'), `${gone.pid}\n`);
      if (files.includes('statehouse.lock')) {
        writeFileSync(
          join(dir, 'statehouse.lock'),
          `pid ${gone.pid} on host other-container since 2026-01-01T00:00:00.000Z\n`,
        );
      }
      await expectSecondServerRefused(first, unit, state);
    },
  );
});

/** The test process's environment without the server's own settings. */
function childEnv(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !k.startsWith('STATEHOUSE_') && k !== 'DATABASE_URL') out[k] = v;
  }
  return out;
}

/** Writes `piece`; resolves once it is flushed to the socket (or the request failed). */
function writeChunk(req: ReturnType<typeof request>, piece: Buffer): Promise<void> {
  return new Promise((resolve) => {
    req.write(piece, () => resolve());
  });
}
