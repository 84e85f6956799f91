import { ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { ROOT } from '../support/paths';

// The bridge between the `pg` driver and the embedded database's single session (the built
// src/database/pglite-bridge.ts), on a real in-memory PGlite in its own process and a real
// Unix socket.
describe('PgliteBridge', () => {
  let host: ChildProcessWithoutNullStreams;
  let dir: string;
  let lines: string[] = [];
  let waiting: ((line: string) => void) | undefined;

  const client = () =>
    new Client({ host: dir, port: 5432, user: 'postgres', database: 'postgres' });
  const nextLine = () =>
    new Promise<string>((resolve) => {
      const line = lines.shift();
      if (line !== undefined) resolve(line);
      else waiting = resolve;
    });
  const ask = async (question: 'calls' | 'intx' | 'changes') => {
    host.stdin.write(`${question}\n`);
    return (await nextLine()).split(' ')[1];
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'statehouse-bridge-'));
    host = spawn(
      process.execPath,
      [join(ROOT, 'test/support/pglite-bridge-host.js'), join(dir, '.s.PGSQL.5432')],
      { cwd: ROOT },
    );
    let buffered = '';
    host.stdout.on('data', (d: Buffer) => {
      buffered += d.toString();
      let nl;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        if (waiting) {
          const w = waiting;
          waiting = undefined;
          w(line);
        } else lines.push(line);
      }
    });
    let stderr = '';
    host.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const first = await Promise.race([
      nextLine(),
      new Promise<string>((resolve) => host.once('exit', () => resolve(`exited: ${stderr}`))),
    ]);
    expect(first).toBe('ready');
    const c = client();
    await c.connect();
    await c.query('CREATE TABLE t (id int PRIMARY KEY, body text)');
    await c.query('CREATE TABLE other (id int PRIMARY KEY)'); // not watched
    await c.end();
  });

  afterAll(async () => {
    const exited = new Promise((resolve) => host.once('exit', resolve));
    host.stdin.end();
    await exited;
    rmSync(dir, { recursive: true, force: true });
    lines = [];
  });

  it('hands a parameterized query to PGlite in one call, not one per protocol message', async () => {
    const c = client();
    await c.connect();
    try {
      await c.query('SELECT $1::int AS n', [1]); // warm: the driver's first query
      await ask('calls');
      const { rows } = await c.query('SELECT $1::int + 1 AS n', [41]);
      expect(rows).toEqual([{ n: 42 }]);
      expect(await ask('calls')).toBe('1');
    } finally {
      await c.end();
    }
  });

  it('keeps the session usable after a failing query', async () => {
    const c = client();
    await c.connect();
    try {
      await expect(c.query('SELECT nope FROM t')).rejects.toThrow(/column "nope" does not exist/);
      await expect(c.query('SELECT $1::text AS v', ['after'])).resolves.toMatchObject({
        rows: [{ v: 'after' }],
      });
    } finally {
      await c.end();
    }
  });

  it('delivers a large result byte for byte (answers are copied out of WebAssembly memory)', async () => {
    const c = client();
    await c.connect();
    try {
      const body = 'x'.repeat(100_000);
      await c.query('INSERT INTO t SELECT g, $1 || g FROM generate_series(1, 40) g', [body]);
      const { rows } = await c.query<{ id: number; body: string }>(
        'SELECT id, body FROM t ORDER BY id',
      );
      expect(rows).toHaveLength(40);
      rows.forEach((r, i) => expect(r.body).toBe(body + String(i + 1)));
    } finally {
      await c.query('DELETE FROM t');
      await c.end();
    }
  });

  it('rolls back the transaction of a connection that goes away inside it', async () => {
    const first = client();
    await first.connect();
    first.on('error', () => undefined);
    await first.query('BEGIN');
    await first.query("INSERT INTO t VALUES (1, 'uncommitted')");
    // The connection drops without COMMIT (a killed client, a broken socket).
    (
      first as unknown as { connection: { stream: { destroy(): void } } }
    ).connection.stream.destroy();
    const next = client();
    await next.connect();
    try {
      const { rows } = await next.query('SELECT count(*)::int AS n FROM t');
      expect(rows).toEqual([{ n: 0 }]);
      // …and the next connection does not start inside the dead one's transaction.
      await next.query("INSERT INTO t VALUES (2, 'committed')");
      expect(await ask('intx')).toBe('false');
    } finally {
      await next.query('DELETE FROM t');
      await next.end();
    }
  });

  it('makes a second connection wait until the first is gone: two clients would share one session', async () => {
    const first = client();
    await first.connect();
    await first.query('BEGIN');
    await first.query("INSERT INTO t VALUES (3, 'first')");
    const second = client();
    const seen = second.connect().then(() => second.query('SELECT count(*)::int AS n FROM t'));
    await new Promise((r) => setTimeout(r, 100));
    // Still served alone: the first one's transaction is not interleaved with anything.
    await first.query('ROLLBACK');
    await first.end();
    try {
      expect((await seen).rows).toEqual([{ n: 0 }]);
    } finally {
      await second.end();
    }
  });

  it('counts what may change a watched table, and only that (what a cached read relies on)', async () => {
    const c = client();
    await c.connect();
    const moved = async (sql: string, values?: unknown[]) => {
      const before = Number(await ask('changes'));
      await c.query(sql, values);
      return Number(await ask('changes')) - before;
    };
    try {
      expect(await moved('SELECT count(*) FROM t WHERE id = $1', [1])).toBe(0);
      expect(await moved('  -- a comment\n/* another */ (SELECT 1)')).toBe(0);
      expect(await moved('SHOW server_version')).toBe(0);
      expect(await moved("INSERT INTO t VALUES ($1, 'a')", [7])).toBe(1);
      expect(await moved("UPDATE t SET body = 'b' WHERE id = 7")).toBe(1);
      expect(
        await moved('WITH gone AS (DELETE FROM t RETURNING id) SELECT count(*) FROM gone'),
      ).toBe(1);
      // Writes to a table that is not watched, parameterized (Parse) or not (Query).
      expect(await moved('INSERT INTO other VALUES ($1)', [1])).toBe(0);
      expect(await moved('DELETE FROM other')).toBe(0);
      expect(await moved('WITH w AS (SELECT id FROM t) INSERT INTO other SELECT id FROM w')).toBe(
        1,
      );
      expect(await moved('SELECT 1 AS x INTO TEMP copied')).toBe(0);
      expect(await moved('BEGIN')).toBe(0);
      expect(await moved('SELECT 1')).toBe(0);
      expect(await moved('ROLLBACK')).toBe(0);
      expect(await moved('TRUNCATE other')).toBe(1);
    } finally {
      await c.end();
    }
  });

  it('counts every run of a named statement, even a read: its Parse may have come in an earlier batch', async () => {
    const c = client();
    await c.connect();
    const moved = async (config: { text: string; name?: string; values?: unknown[] }) => {
      const before = Number(await ask('changes'));
      await c.query(config);
      return Number(await ask('changes')) - before;
    };
    try {
      const read = { name: 'read-t', text: 'SELECT count(*) FROM t WHERE id = $1', values: [1] };
      expect(await moved(read)).toBe(1); // Parse and Bind together
      expect(await moved(read)).toBe(1); // Bind alone: what it runs is not looked up again
      // The driver's unnamed statement comes with its Parse every time: judged by its SQL.
      expect(await moved({ text: 'SELECT $1::int AS n', values: [1] })).toBe(0);
    } finally {
      await c.end();
    }
  });

  it('counts a Bind of the unnamed statement past a Sync: an error may have skipped the Parse seen before it', async () => {
    // Raw protocol: the driver always sends Parse with Bind; another client need not.
    const socket = connect(join(dir, '.s.PGSQL.5432'));
    let received = Buffer.alloc(0);
    let ready: (() => void) | undefined;
    let readyCount = 0;
    socket.on('data', (d: Buffer) => {
      received = Buffer.concat([received, d]);
      for (;;) {
        if (received.length < 5) break;
        const length = 1 + received.readInt32BE(1);
        if (received.length < length) break;
        if (received[0] === 0x5a) readyCount++; // ReadyForQuery
        received = received.subarray(length);
      }
      if (ready) ready();
    });
    const untilReady = (n: number) =>
      new Promise<void>((resolve) => {
        const check = () => {
          if (readyCount >= n) {
            ready = undefined;
            resolve();
          }
        };
        ready = check;
        check();
      });
    const message = (type: string, ...parts: Buffer[]) => {
      const body = Buffer.concat(parts);
      const head = Buffer.alloc(5);
      head.write(type, 0);
      head.writeInt32BE(4 + body.length, 1);
      return Buffer.concat([head, body]);
    };
    const str = (text: string) => Buffer.from(`${text}\0`);
    const int16 = (n: number) => Buffer.from([n >> 8, n & 0xff]);
    const int32 = (n: number) => {
      const b = Buffer.alloc(4);
      b.writeInt32BE(n);
      return b;
    };
    const parse = (sql: string) => message('P', str(''), str(sql), int16(0));
    const bind = (statement: string) =>
      message('B', str(''), str(statement), int16(0), int16(0), int16(0));
    const run = [message('E', str(''), int32(0)), message('S')];
    let expected = 1;
    const moved = async (...messages: Buffer[]) => {
      const before = Number(await ask('changes'));
      socket.write(Buffer.concat(messages));
      await untilReady(++expected);
      return Number(await ask('changes')) - before;
    };
    try {
      const startup = Buffer.concat([
        str('user'),
        str('postgres'),
        str('database'),
        str('postgres'),
        str(''),
      ]);
      socket.write(Buffer.concat([int32(8 + startup.length), int32(196608), startup]));
      await untilReady(1);
      expect(await moved(parse("INSERT INTO t VALUES (11, 'x')"), bind(''), ...run)).toBe(1);
      expect(await moved(parse('DELETE FROM t WHERE id = 11'), ...run.slice(1))).toBe(1);
      // The Bind of a statement that does not exist fails, so the Parse after it is skipped…
      expect(await moved(bind('nope'), parse('SELECT 1'), bind(''), ...run)).toBe(1);
      // …and this Bind runs the DELETE parsed before: it must count.
      expect(await moved(bind(''), ...run)).toBe(1);
    } finally {
      socket.end();
    }
    const check = client();
    await check.connect();
    try {
      // The DELETE did run (the case is real, not only conservative).
      expect((await check.query('SELECT count(*)::int AS n FROM t WHERE id = 11')).rows).toEqual([
        { n: 0 },
      ]);
    } finally {
      await check.end();
    }
  });

  it('answers an SSL request with "N" (no TLS on a local socket)', async () => {
    const reply = await new Promise<Buffer>((resolve, reject) => {
      const socket = connect(join(dir, '.s.PGSQL.5432'));
      const request = Buffer.alloc(8);
      request.writeInt32BE(8, 0);
      request.writeInt32BE(80877103, 4);
      socket.once('data', (d) => {
        socket.destroy();
        resolve(d);
      });
      socket.once('error', reject);
      socket.write(request);
    });
    expect(reply.toString()).toBe('N');
  });
});
