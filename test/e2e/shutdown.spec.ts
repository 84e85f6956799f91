/**
 * Stopping under load (on the embedded database, and on PostgreSQL with DATABASE_URL): SIGTERM
 * to `statehouse serve` while 20 state writes of 4 MiB each go through both doors — S3 PutObject
 * under `/s3` and at the root of the S3 listener (STATEHOUSE_S3_PORT), HTTP backend POST — 16
 * of them in flight when the signal arrives, 4 sent during the drain. The stop:
 *
 *  - `/readyz` answers 503 at once (`/healthz` still 200: the process is alive);
 *  - requests that arrive during the drain get 503 with `Retry-After` and `Connection: close`, in
 *    their door's format (S3 XML `ServiceUnavailable`, JSON), after their body was read — never a
 *    reset; new connections are accepted for the grace (STATEHOUSE_SHUTDOWN_GRACE), then refused
 *    while the requests in flight are still finishing;
 *  - the requests in flight finish (200), each answer with `Connection: close`; an idle
 *    kept-alive connection is closed;
 *  - the process exits 143 within STATEHOUSE_SHUTDOWN_TIMEOUT.
 * After a restart on the same database: every write answered 200 is stored byte for byte as its
 * unit's only version, with its `state.write` audit event; no refused write left anything; no
 * version anywhere lacks its blob or holds other bytes than its checksum says; the locks taken
 * before the stop are still held; state reads audited just before the stop are in the audit
 * log (the queue is stored before the database closes).
 * The figure printed is the shutdown time under load.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { Agent, IncomingHttpHeaders, request } from 'node:http';
import { connect, Socket } from 'node:net';
import { freshServerEnv, ON_POSTGRES } from '../support/database';
import { sha256Hex } from '../support/hashes';
import { eventually, portIsFree, sleep } from '../support/processes';
import { S3Creds, s3Code, signS3 } from '../support/s3-signer';
import { RunningServer, s3CredentialsFor, spawnServer } from '../support/server';
import { tfStateBytes } from '../support/tf-state';

jest.setTimeout(300_000);

const MiB = 1024 * 1024;
const GRACE_SECONDS = 2;
const TIMEOUT_SECONDS = 30;

/** A Terraform v4 state of about `size` bytes, unlike any other (random padding). */
function tfState(serial: number, size: number): Buffer {
  const pad = randomBytes(Math.ceil((size * 3) / 4)).toString('base64url');
  return tfStateBytes({ serial, lineage: randomUUID(), outputs: { pad }, checkResults: false });
}

function lockInfo(id: string, path: string): string {
  return `{"ID":"${id}","Operation":"OperationTypeApply","Info":"","Who":"ci@runner","Version":"1.11.4","Created":"2026-01-02T03:04:05.123456789Z","Path":"${path}"}`;
}

interface Answer {
  status?: number;
  headers?: IncomingHttpHeaders;
  text?: string;
  /** The request failed without a whole answer (a reset, a close). */
  error?: string;
}

type Door = 's3' | 's3-port' | 'backend';

interface Write {
  door: Door;
  unit: string;
  body: Buffer;
  beforeStop: boolean;
  answer: Promise<Answer>;
  firstChunkSent: Promise<void>;
  settled: boolean;
}

/**
 * Sends a request whose body goes out in `chunks` pieces `pauseMs` apart (so it is still being
 * received when the signal comes) and resolves with the whole answer, or the error.
 */
function send(
  port: number,
  r: { method: string; path: string; headers: Record<string, string>; body?: Buffer },
  pace: { chunks: number; pauseMs: number },
  agent: Agent | false,
): { answer: Promise<Answer>; firstChunkSent: Promise<void> } {
  const body = r.body ?? Buffer.alloc(0);
  const req = request({
    host: '127.0.0.1',
    port,
    method: r.method,
    path: r.path,
    headers: { ...r.headers, 'content-length': String(body.length) },
    agent,
  });
  let answered = false;
  const answer = new Promise<Answer>((resolve) => {
    req.once('response', (res) => {
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.once('end', () => {
        answered = true;
        resolve({
          status: res.statusCode,
          headers: res.headers,
          text: Buffer.concat(parts).toString(),
        });
      });
      res.once('error', (e) => resolve({ error: `answer cut off: ${e.message}` }));
      res.once('aborted', () => resolve({ error: 'answer aborted' }));
    });
    req.once('error', (e) => resolve({ error: e.message }));
    req.once('close', () => {
      if (!answered) resolve({ error: 'closed without a whole answer' });
    });
  });
  const size = Math.ceil(body.length / pace.chunks);
  let first: () => void = () => undefined;
  const firstChunkSent = new Promise<void>((r) => (first = r));
  void (async () => {
    for (let at = 0; at < body.length && !req.destroyed; at += size) {
      const last = at + size >= body.length;
      const piece = body.subarray(at, at + size);
      await new Promise<void>((r) => (last ? req.end(piece, r) : req.write(piece, () => r())));
      first();
      if (!last) await sleep(pace.pauseMs);
    }
    if (body.length === 0) req.end(() => first());
  })();
  return { answer, firstChunkSent };
}

/** GET over a connection of its own, with the raw headers. */
function get(port: number, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  return send(port, { method: 'GET', path, headers }, { chunks: 1, pauseMs: 0 }, false).answer;
}

/** Starts a write of a 4 MiB state to the unit `shutdown/<door>-<i>` through `door`. */
async function startWrite(
  server: RunningServer,
  creds: S3Creds,
  w: {
    door: Door;
    i: number;
    beforeStop: boolean;
    pace: { chunks: number; pauseMs: number };
    agent: Agent;
  },
): Promise<Write> {
  const unit = `shutdown/${w.door}-${w.i}`;
  const body = tfState(1, 4 * MiB);
  let sent: ReturnType<typeof send>;
  if (w.door === 'backend') {
    sent = send(
      server.port,
      {
        method: 'POST',
        path: `/v1/backend/${unit}`,
        headers: { ...server.auth, 'content-type': 'application/json' },
        body,
      },
      w.pace,
      w.agent,
    );
  } else {
    const port = w.door === 's3' ? server.port : (server.s3Port as number);
    const signed = await signS3(port, creds, {
      method: 'PUT',
      key: `${unit}/terraform.tfstate`,
      body,
      ...(w.door === 's3-port' ? { base: '' } : {}),
    });
    sent = send(
      port,
      { method: 'PUT', path: signed.target, headers: signed.headers, body },
      w.pace,
      w.agent,
    );
  }
  const write: Write = {
    door: w.door,
    unit,
    body,
    beforeStop: w.beforeStop,
    answer: sent.answer,
    firstChunkSent: sent.firstChunkSent,
    settled: false,
  };
  void sent.answer.then(() => (write.settled = true));
  return write;
}

describe('SIGTERM under load: 20 state writes through both doors', () => {
  let env: Record<string, string>;
  let cleanup: (() => Promise<void>) | undefined;
  const servers: RunningServer[] = [];

  beforeEach(async () => {
    const fresh = await freshServerEnv();
    cleanup = fresh.cleanup;
    env = {
      ...fresh.env,
      STATEHOUSE_S3_PORT: '0',
      STATEHOUSE_SHUTDOWN_TIMEOUT: `${TIMEOUT_SECONDS}s`,
      STATEHOUSE_SHUTDOWN_GRACE: `${GRACE_SECONDS}s`,
      STATEHOUSE_STS_TTL: '1h',
    };
  });

  afterEach(async () => {
    for (const s of servers.splice(0)) await s.kill();
    await cleanup?.();
    cleanup = undefined;
  });

  async function start(extra: Record<string, string> = {}): Promise<RunningServer> {
    const s = await spawnServer({ ...env, ...extra });
    servers.push(s);
    return s;
  }

  async function api(s: RunningServer, path: string, init: RequestInit = {}): Promise<Response> {
    return fetch(`${s.url}${path}`, {
      ...init,
      headers: { ...s.auth, ...(init.headers as Record<string, string> | undefined) },
    });
  }

  async function versions(
    s: RunningServer,
    unit: string,
  ): Promise<{ version: number; sha256: string; size: number }[] | 'no unit'> {
    const r = await api(s, `/v1/units/${encodeURIComponent(unit)}/versions`);
    if (r.status === 404) return 'no unit';
    expect(r.status).toBe(200);
    const page = (await r.json()) as { items: { version: number; sha256: string; size: number }[] };
    return page.items;
  }

  it('drains the writes in flight, refuses the late ones with 503 in their door’s format, keeps locks and audit events, exits 143 in time', async () => {
    let server = await start();
    const s3Port = server.s3Port as number;
    const creds = await s3CredentialsFor(server, 'svc:shutdown');

    // Locks taken by clients before the stop: through the HTTP backend and an S3 lock object.
    const backendLock = randomUUID();
    const locked = await api(server, '/v1/backend/shutdown/locked-backend', {
      method: 'LOCK',
      body: lockInfo(backendLock, ''),
    });
    expect(locked.status).toBe(200);
    const s3Lock = randomUUID();
    const lockKey = 'shutdown/locked-s3/terraform.tfstate.tflock';
    const lockBody = Buffer.from(lockInfo(s3Lock, 'tfstate/shutdown/locked-s3/terraform.tfstate'));
    const lockPut = await signS3(server.port, creds, {
      method: 'PUT',
      key: lockKey,
      body: lockBody,
      headers: { 'if-none-match': '*' },
    });
    const lockAnswer = await send(
      server.port,
      { method: 'PUT', path: lockPut.target, headers: lockPut.headers, body: lockBody },
      { chunks: 1, pauseMs: 0 },
      false,
    ).answer;
    expect(lockAnswer.status).toBe(200);

    // A state to read just before the stop (reads are audited through the queue).
    const readable = tfState(1, 2048);
    expect(
      (await api(server, '/v1/backend/shutdown/read-me', { method: 'POST', body: readable }))
        .status,
    ).toBe(200);

    // A kept-alive connection, idle when the signal comes: the server closes it.
    const idle: Socket = connect(server.port, '127.0.0.1');
    const idleClosed = new Promise<void>((r) => idle.once('close', () => r()));
    idle.on('error', () => undefined);
    await new Promise<void>((r) => {
      idle.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n');
      idle.once('data', () => r());
    });

    const keepAlive = new Agent({ keepAlive: true, maxSockets: 64 });
    const writes: Write[] = [];
    const write = async (door: Door, i: number, beforeStop: boolean, slow: boolean) => {
      const pace = slow ? { chunks: 24, pauseMs: 250 } : { chunks: 4, pauseMs: 20 };
      writes.push(await startWrite(server, creds, { door, i, beforeStop, pace, agent: keepAlive }));
    };

    // 16 writes in flight: their bodies arrive over about 6 s.
    for (let i = 0; i < 4; i++) await write('s3', i, true, true);
    for (let i = 0; i < 4; i++) await write('s3-port', i, true, true);
    for (let i = 0; i < 8; i++) await write('backend', i, true, true);
    await Promise.all(writes.map((w) => w.firstChunkSent));
    await sleep(1500); // the server has every request (their heads and first pieces)

    const reads = await Promise.all(
      [1, 2, 3].map(() => get(server.port, '/v1/backend/shutdown/read-me', server.auth)),
    );
    for (const r of reads) expect(r.status).toBe(200);

    const exited = new Promise<number | null>((r) => server.proc.once('exit', (c) => r(c)));
    const signalled = Date.now();
    server.proc.kill('SIGTERM');
    expect(await eventually(() => server.output().includes('SIGTERM: stopping'), 10_000)).toBe(
      true,
    );
    const inFlight = Number(/(\d+) request\(s\) in flight/.exec(server.output())?.[1]);

    // At once: not ready; alive; the idle kept-alive connection closed.
    const ready = await get(server.port, '/readyz');
    expect(ready.status).toBe(503);
    expect(ready.headers?.connection).toBe('close');
    expect(JSON.parse(ready.text ?? '')).toMatchObject({
      status: 'error',
      error: { server: { status: 'down', message: 'stopping (SIGTERM)' } },
    });
    expect((await get(server.port, '/healthz')).status).toBe(200);
    await idleClosed;

    // 4 writes that arrive during the drain (new connections, within the grace).
    await write('s3', 4, false, false);
    await write('s3-port', 4, false, false);
    await write('backend', 8, false, false);
    await write('backend', 9, false, false);
    const late = writes.filter((w) => !w.beforeStop);
    const lateAnswers = await Promise.all(late.map((w) => w.answer));

    // After the grace: no new connections, while the requests in flight are still finishing.
    const refusing = await eventually(
      async () => (await portIsFree(server.port)) && (await portIsFree(s3Port)),
      (GRACE_SECONDS + 5) * 1000,
    );
    expect(refusing).toBe(true);
    expect(server.proc.exitCode).toBeNull();
    expect(writes.filter((w) => w.beforeStop && !w.settled).length).toBeGreaterThan(0);
    await expect(fetch(`${server.url}/healthz`)).rejects.toThrow();

    const answers = await Promise.all(writes.map((w) => w.answer));
    const status = await exited;
    const shutdownMs = Date.now() - signalled;
    keepAlive.destroy();

    // Every write got a whole answer: 200 for the 16 in flight, 503 for the 4 late ones.
    expect(answers.filter((a) => a.error !== undefined)).toEqual([]);
    // The 16 writes (and maybe a read whose answer the server has not yet seen handed over).
    expect(inFlight).toBeGreaterThanOrEqual(16);
    writes.forEach((w, i) => {
      expect({ unit: w.unit, status: answers[i].status }).toEqual({
        unit: w.unit,
        status: w.beforeStop ? 200 : 503,
      });
      // A kept-alive connection is closed after its current request.
      expect(answers[i].headers?.connection).toBe('close');
    });
    late.forEach((w, i) => {
      const a = lateAnswers[i];
      expect(a.headers?.['retry-after']).toBe('2');
      if (w.door === 'backend') {
        expect(a.headers?.['content-type']).toMatch(/^application\/json/);
        expect(JSON.parse(a.text ?? '')).toMatchObject({ statusCode: 503, code: 'unavailable' });
      } else {
        expect(a.headers?.['content-type']).toMatch(/^application\/xml/);
        expect(s3Code(a.text ?? '')).toBe('ServiceUnavailable');
        expect(a.headers?.['x-amz-request-id']).toEqual(expect.any(String));
      }
    });

    expect(status).toBe(143);
    expect(shutdownMs).toBeLessThan(TIMEOUT_SECONDS * 1000);
    expect(server.output()).toMatch(/stopped cleanly in \d+ ms/);
    expect(server.output()).not.toMatch(/audit events not stored/);
    console.log(
      `shutdown under load: SIGTERM to exit ${shutdownMs} ms with ${inFlight} writes of 4 MiB in flight ` +
        `(their bodies paced over ~6 s by the client; grace ${GRACE_SECONDS} s); server: ` +
        `${/stopped cleanly in \d+ ms/.exec(server.output())?.[0]}`,
    );

    // The same database again.
    server = await start();
    for (const [i, w] of writes.entries()) {
      const listed = await versions(server, w.unit);
      if (answers[i].status !== 200) {
        expect({ unit: w.unit, listed }).toEqual({ unit: w.unit, listed: 'no unit' });
        continue;
      }
      expect({ unit: w.unit, listed }).toEqual({
        unit: w.unit,
        listed: [
          expect.objectContaining({ version: 1, sha256: sha256Hex(w.body), size: w.body.length }),
        ],
      });
      const current = await api(server, `/v1/units/${encodeURIComponent(w.unit)}/state`);
      expect(current.status).toBe(200);
      expect(Buffer.from(await current.arrayBuffer()).equals(w.body)).toBe(true);
      const events = await api(
        server,
        `/v1/audit?type=state.write&resource=${encodeURIComponent(w.unit)}`,
      );
      const items = ((await events.json()) as { items: { requestId: string; door: string }[] })
        .items;
      expect(items.map((e) => e.requestId)).toEqual([answers[i].headers?.['x-request-id']]);
    }

    // No version anywhere without its blob, or with other bytes than its checksum.
    const units = await api(
      server,
      `/v1/units?prefix=${encodeURIComponent('shutdown/')}&limit=100`,
    );
    const names = ((await units.json()) as { items: { name: string }[] }).items.map((u) => u.name);
    expect(names.length).toBeGreaterThanOrEqual(17);
    for (const name of names) {
      const listed = await versions(server, name);
      if (listed === 'no unit') continue;
      for (const v of listed) {
        const r = await api(server, `/v1/units/${encodeURIComponent(name)}/versions/${v.version}`);
        expect({ name, version: v.version, status: r.status }).toEqual({
          name,
          version: v.version,
          status: 200,
        });
        const bytes = Buffer.from(await r.arrayBuffer());
        expect({ name, size: bytes.length, sha256: sha256Hex(bytes) }).toEqual({
          name,
          size: v.size,
          sha256: v.sha256,
        });
      }
    }

    // The locks are still held, as their clients took them.
    const locks = (await (await api(server, '/v1/locks')).json()) as { unit: string; id: string }[];
    expect(locks.filter((l) => l.unit.startsWith('shutdown/'))).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ unit: 'shutdown/locked-backend', id: backendLock }),
        expect.objectContaining({ unit: 'shutdown/locked-s3', id: s3Lock }),
      ]),
    );

    // The reads just before the stop were audited.
    const readEvents = await api(
      server,
      `/v1/audit?type=state.read&resource=${encodeURIComponent('shutdown/read-me')}`,
    );
    const readIds = ((await readEvents.json()) as { items: { requestId: string }[] }).items.map(
      (e) => e.requestId,
    );
    expect(readIds).toEqual(
      expect.arrayContaining(reads.map((r) => r.headers?.['x-request-id'] as string)),
    );
    await server.stop();
  });

  it('shutdown time under load: 20 writes of 4 MiB sent at full speed, SIGTERM while they are received', async () => {
    const server = await start({ STATEHOUSE_SHUTDOWN_GRACE: `${GRACE_SECONDS}s` });
    const creds = await s3CredentialsFor(server, 'svc:shutdown-timed');
    const agent = new Agent({ keepAlive: true, maxSockets: 64 });
    const pace = { chunks: 8, pauseMs: 0 };
    const doors: Door[] = ['s3', 's3-port', 'backend', 'backend'];
    const writes = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        startWrite(server, creds, { door: doors[i % 4], i, beforeStop: true, pace, agent }),
      ),
    );
    await Promise.all(writes.map((w) => w.firstChunkSent));
    const exited = new Promise<number | null>((r) => server.proc.once('exit', (c) => r(c)));
    const early = writes.filter((w) => w.settled).length; // answered before the signal
    const signalled = Date.now();
    server.proc.kill('SIGTERM');
    const answers = await Promise.all(writes.map((w) => w.answer));
    const lastAnswer = Date.now() - signalled;
    const status = await exited;
    const total = Date.now() - signalled;
    agent.destroy();
    const inFlight = Number(/(\d+) request\(s\) in flight/.exec(server.output())?.[1]);
    expect(answers.filter((a) => a.error !== undefined)).toEqual([]);
    // Received before the signal: answered 200; arrived after it: refused with 503.
    expect(answers.filter((a) => a.status === 200)).toHaveLength(early + inFlight);
    expect(answers.filter((a) => a.status !== 200 && a.status !== 503)).toEqual([]);
    expect(status).toBe(143);
    expect(total).toBeLessThan(TIMEOUT_SECONDS * 1000);
    console.log(
      `shutdown time under load (${ON_POSTGRES ? 'PostgreSQL' : 'embedded'}): ${inFlight} of 20 writes of 4 MiB in flight at SIGTERM; ` +
        `last answer after ${lastAnswer} ms, exit after ${total} ms (grace ${GRACE_SECONDS} s); ` +
        `server: ${/stopped cleanly in \d+ ms/.exec(server.output())?.[0]}`,
    );
  });

  it('audit events queued at the moment of SIGTERM are stored before the database closes', async () => {
    const server = await start({ STATEHOUSE_SHUTDOWN_GRACE: '0s' });
    const unit = `shutdown/queued-${randomUUID().slice(0, 8)}`;
    expect(
      (await api(server, `/v1/backend/${unit}`, { method: 'POST', body: tfState(1, 1024) })).status,
    ).toBe(200);
    // Reads are queued and stored in batches (every 250 ms): stop right after them.
    const reads = await Promise.all(
      Array.from({ length: 20 }, () => get(server.port, `/v1/backend/${unit}`, server.auth)),
    );
    const exited = new Promise<number | null>((r) => server.proc.once('exit', (c) => r(c)));
    server.proc.kill('SIGTERM');
    expect(await exited).toBe(143);
    expect(server.output()).not.toMatch(/audit events? (not stored|could not be stored)/);

    const again = await start();
    const events = await api(
      again,
      `/v1/audit?type=state.read&resource=${encodeURIComponent(unit)}&limit=100`,
    );
    const ids = ((await events.json()) as { items: { requestId: string }[] }).items.map(
      (e) => e.requestId,
    );
    expect(ids.sort()).toEqual(reads.map((r) => r.headers?.['x-request-id'] as string).sort());
    await again.stop();
  });
});
