import type { QueryConfig } from 'pg';
import type { DataSource, QueryFailedError } from 'typeorm';

type PooledModule = typeof import('../../src/database/pooled-statement');

/** A data source whose pool's one connection answers with `answer`, recording what it was sent. */
function fakeDataSource(answer: (c: QueryConfig) => unknown) {
  const sent: QueryConfig[] = [];
  const released: unknown[] = [];
  const logged: string[] = [];
  const client = {
    query: jest.fn((c: QueryConfig) => {
      sent.push(c);
      return Promise.resolve().then(() => answer(c));
    }),
    release: (e?: unknown) => released.push(e),
    listeners: [] as ((e: Error) => void)[],
    on(event: string, f: (e: Error) => void) {
      if (event === 'error') this.listeners.push(f);
    },
    removeListener(event: string, f: (e: Error) => void) {
      if (event === 'error') this.listeners = this.listeners.filter((g) => g !== f);
    },
  };
  const ds = {
    driver: { master: { connect: () => Promise.resolve(client) } },
    logger: { logQueryError: (_e: unknown, text: string) => logged.push(text) },
  } as unknown as DataSource;
  return { ds, sent, released, logged, client };
}

describe('pooledRows (the lock fast paths on the pool itself)', () => {
  let mod: PooledModule;
  beforeEach(() => {
    jest.isolateModules(() => {
      mod = jest.requireActual<PooledModule>('../../src/database/pooled-statement');
    });
  });

  it('names each text once, the same name every time, and only where allowed', async () => {
    const { ds, sent } = fakeDataSource(() => ({ rows: [{ ok: 1 }] }));
    expect(await mod.pooledRows(ds, 'SELECT 1', [])).toEqual([{ ok: 1 }]);
    expect(sent[0].name).toBeUndefined();
    mod.allowNamedStatements(ds);
    await mod.pooledRows(ds, 'SELECT $1::int', [1]);
    await mod.pooledRows(ds, 'SELECT $1::int', [2]);
    await mod.pooledRows(ds, 'SELECT $1::text', ['x']);
    const [a, b, c] = sent.slice(1).map((q) => q.name);
    expect(a).toMatch(/^statehouse_[0-9a-f]{40}$/);
    expect(b).toBe(a);
    expect(c).toMatch(/^statehouse_[0-9a-f]{40}$/);
    expect(c).not.toBe(a);
    expect(sent[2].values).toEqual([2]);
  });

  it('names a text by its digest, so every process (every replica) gives one text the same name and two texts two names', () => {
    const named = (text: string, order: string[]): string | undefined => {
      let other!: PooledModule;
      jest.isolateModules(() => {
        other = jest.requireActual<PooledModule>('../../src/database/pooled-statement');
      });
      const { ds } = fakeDataSource(() => ({ rows: [] }));
      other.allowNamedStatements(ds);
      // Each "replica" meets its statements in its own order: a counter would name them apart.
      for (const t of order) other.statementName(ds, t);
      return other.statementName(ds, text);
    };
    const lock = named('LOCK TEXT', ['UNLOCK TEXT', 'LOCK TEXT']);
    expect(named('LOCK TEXT', ['LOCK TEXT'])).toBe(lock);
    expect(named('UNLOCK TEXT', ['LOCK TEXT', 'UNLOCK TEXT'])).not.toBe(lock);
  });

  it('gives at most MAX_NAMED_STATEMENTS names; later texts run unnamed', () => {
    const { ds } = fakeDataSource(() => ({ rows: [] }));
    mod.allowNamedStatements(ds);
    const first = mod.statementName(ds, 'SELECT 0');
    for (let i = 1; i < mod.MAX_NAMED_STATEMENTS; i++) {
      expect(mod.statementName(ds, `SELECT ${i}`)).toMatch(/^statehouse_[0-9a-f]{40}$/);
    }
    expect(mod.statementName(ds, 'SELECT -1')).toBeUndefined();
    expect(mod.statementName(ds, 'SELECT 0')).toBe(first);
  });

  it('a pooler that loses prepared statements: that statement runs again unnamed, and none is named after', async () => {
    const { ds, sent, released } = fakeDataSource((c) => {
      if (c.name !== undefined) throw Object.assign(new Error('gone'), { code: '26000' });
      return { rows: [{ n: 1 }] };
    });
    mod.allowNamedStatements(ds);
    expect(await mod.pooledRows(ds, 'SELECT 1', [])).toEqual([{ n: 1 }]);
    expect(await mod.pooledRows(ds, 'SELECT 2', [])).toEqual([{ n: 1 }]);
    expect(sent[0].name).toMatch(/^statehouse_[0-9a-f]{40}$/);
    expect(sent.slice(1).map((c) => c.name)).toEqual([undefined, undefined]);
    expect(released).toEqual([undefined, undefined]);
  });

  it('a failed statement is logged and thrown as TypeORM throws it, its connection returned unharmed', async () => {
    const pgError = Object.assign(new Error('deadlock detected'), { code: '40P01' });
    const { ds, released, logged } = fakeDataSource(() => {
      throw pgError;
    });
    const e = await mod.pooledRows(ds, 'DELETE FROM x', [1]).catch((x: unknown) => x);
    // (The module's own copy of TypeORM: isolateModules loads it afresh.)
    expect((e as Error).constructor.name).toBe('QueryFailedError');
    expect((e as QueryFailedError).driverError).toBe(pgError);
    expect(logged).toEqual(['DELETE FROM x']);
    expect(released).toEqual([undefined]);
  });

  it('a connection that breaks while it runs the statement is given back broken (the pool drops it), and nothing crashes', async () => {
    const broken = new Error('Connection terminated unexpectedly');
    const fake = fakeDataSource(() => {
      // pg tells the holder by an 'error' event, and fails the query
      for (const f of fake.client.listeners) f(broken);
      throw broken;
    });
    await expect(fake.ds && mod.pooledRows(fake.ds, 'SELECT 1', [])).rejects.toThrow(
      'Connection terminated unexpectedly',
    );
    expect(fake.released).toEqual([broken]);
    expect(fake.client.listeners).toEqual([]);
  });
});

describe('pooledRows when pg stops waiting (query_timeout)', () => {
  it('gives the connection back broken, so that no later holder waits behind the statement', async () => {
    const mod = await import('../../src/database/pooled-statement');
    const timedOut = new Error('Query read timeout');
    const fake = fakeDataSource(() => {
      throw timedOut;
    });
    await expect(mod.pooledRows(fake.ds, 'SELECT pg_sleep(60)', [])).rejects.toThrow(
      'Query read timeout',
    );
    expect(fake.released).toEqual([timedOut]);
    expect(fake.logged).toEqual(['SELECT pg_sleep(60)']);
  });
});

describe('binaryCopyRows (the rows of a binary COPY)', () => {
  let binaryCopyRows: PooledModule['binaryCopyRows'];
  beforeAll(async () => {
    ({ binaryCopyRows } = await import('../../src/database/pooled-statement'));
  });

  const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
  const int16 = (n: number) => Buffer.from([(n >> 8) & 0xff, n & 0xff]);
  const int32 = (n: number) => {
    const b = Buffer.alloc(4);
    b.writeInt32BE(n);
    return b;
  };
  const header = (extension = Buffer.alloc(0)) =>
    Buffer.concat([SIGNATURE, int32(0), int32(extension.length), extension]);
  const field = (v: Buffer | null) =>
    v === null ? int32(-1) : Buffer.concat([int32(v.length), v]);
  const row = (...values: (Buffer | null)[]) =>
    Buffer.concat([int16(values.length), ...values.map(field)]);
  const TRAILER = int16(-1);

  it('answers each row as its values’ bytes, NULL as null, an empty value as empty, skipping a header extension', () => {
    const rows = binaryCopyRows(
      Buffer.concat([
        header(Buffer.from('ext')),
        row(Buffer.from('abc'), null, Buffer.alloc(0)),
        row(int32(7)),
        TRAILER,
      ]),
    );
    expect(rows.map((r) => r.map((v) => (v === null ? null : v.toString('hex'))))).toEqual([
      ['616263', null, ''],
      ['00000007'],
    ]);
    expect(binaryCopyRows(Buffer.concat([header(), TRAILER]))).toEqual([]);
  });

  it.each([
    [
      'no signature',
      Buffer.concat([Buffer.from('PGCOPY\n\xff\r\n\x01', 'latin1'), int32(0), int32(0), TRAILER]),
    ],
    ['nothing at all', Buffer.alloc(0)],
    ['no trailer', Buffer.concat([header(), row(Buffer.from('a'))])],
    [
      'the OID flag (an extra field per row)',
      Buffer.concat([SIGNATURE, int32(1 << 16), int32(0), TRAILER]),
    ],
    ['an unknown flag', Buffer.concat([SIGNATURE, int32(1), int32(0), TRAILER])],
    [
      'a value longer than the bytes',
      Buffer.concat([header(), int16(1), int32(5), Buffer.from('ab')]),
    ],
    ['an extension longer than the bytes', Buffer.concat([SIGNATURE, int32(0), int32(1_000_000)])],
    ['a negative length', Buffer.concat([header(), int16(1), int32(-2), TRAILER])],
    ['a negative field count', Buffer.concat([header(), int16(-3), TRAILER])],
    ['bytes after the trailer', Buffer.concat([header(), TRAILER, Buffer.from('x')])],
  ])('refuses %s instead of answering wrong bytes', (_name, bytes) => {
    expect(() => binaryCopyRows(bytes)).toThrow(/malformed binary COPY data/);
  });
});
