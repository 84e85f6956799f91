import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { noteDefaultIsolation } from '../../src/database/transaction';
import { MemoryBlobStore } from '../../src/storage/memory-blob.store';
import { DATABASE_KIND, ON_POSTGRES, onTestDatabase, TestDatabase } from '../support/database';
import { sentStatementsOf } from '../support/statements';
import { ADMIN, body, buildServices, failure, Services, tfState } from '../support/services';

/**
 * What a GET of the current state sends to the database: one statement, on the pool itself (no
 * TypeORM QueryRunner), prepared once per connection on PostgreSQL, reading only the columns a
 * GET serves. Nothing of the current version is kept between requests on PostgreSQL: a write
 * acknowledged by one replica is what the next GET on another replica serves.
 */
describe(`the statements of a state read (${DATABASE_KIND})`, () => {
  let db: TestDatabase;
  let s: Services;
  let n = 0;
  onTestDatabase(async (opened) => {
    db = opened;
    await noteDefaultIsolation(db.dataSource);
    s = buildServices(db.dataSource, new MemoryBlobStore());
  });

  const write = (svc: Services, unit: string, serial: number, workspace = 'default') =>
    svc.writer.write({
      unit,
      workspace,
      principal: ADMIN,
      door: 'api',
      body: body(tfState(serial, 'lineage-reads', { n: serial })),
    });
  const readAll = async (svc: Services, unit: string, workspace = 'default') => {
    const opened = await svc.reader.openCurrent(ADMIN, { unit, workspace });
    const chunks: Buffer[] = [];
    for await (const c of opened.body) chunks.push(Buffer.from(c as Buffer));
    return { version: opened.version, text: Buffer.concat(chunks).toString() };
  };

  it('a GET of the current state sends one statement, on the pool, named on PostgreSQL, without the outputs', async () => {
    const unit = `reads/u-${++n}`;
    await write(s, unit, 1);
    await write(s, unit, 2);
    await readAll(s, unit); // the RBAC rules are loaded once, not per read
    const runners = jest.spyOn(db.dataSource, 'createQueryRunner');
    try {
      const sent = await sentStatementsOf(async () => {
        await readAll(s, unit);
        await readAll(s, unit);
        await s.reader.current(ADMIN, { unit, workspace: 'default' });
      });
      expect(runners).not.toHaveBeenCalled();
      expect(sent).toHaveLength(3);
      const [get1, get2, head] = sent;
      expect(get1.text).toMatch(/^SELECT v\.version,/);
      expect(get1.text).not.toMatch(/outputs/);
      expect(get2.text).toBe(get1.text);
      expect(head.text).toBe(get1.text);
      if (ON_POSTGRES) {
        expect(get1.name).toMatch(/^statehouse_[0-9a-f]{40}$/);
        expect([get2.name, head.name]).toEqual([get1.name, get1.name]);
      } else {
        expect(sent.map((x) => x.name)).toEqual([undefined, undefined, undefined]);
      }
    } finally {
      runners.mockRestore();
    }
  });

  it('the GET answers what it answered through TypeORM: the version as listed, the bytes written', async () => {
    const unit = `reads/u-${++n}`;
    await write(s, unit, 7);
    const got = await readAll(s, unit);
    const page = await s.reader.listVersions(ADMIN, { unit, workspace: 'default' }, 1, undefined);
    expect(got.version).toEqual(page.items[0]);
    expect(got.text).toBe(tfState(7, 'lineage-reads', { n: 7 }));
    expect(await s.reader.current(ADMIN, { unit, workspace: 'default' })).toEqual(page.items[0]);
  });

  it('no state to serve is state_not_found: an unknown unit, an unknown workspace, a deleted state or unit', async () => {
    const unit = `reads/u-${++n}`;
    await write(s, unit, 1);
    await write(s, unit, 1, 'other');
    const codes = async (u: string, ws: string) => [
      (await failure(s.reader.openCurrent(ADMIN, { unit: u, workspace: ws }))).code,
      (await failure(s.reader.current(ADMIN, { unit: u, workspace: ws }))).code,
    ];
    expect(await codes(`reads/none-${n}`, 'default')).toEqual([
      'state_not_found',
      'state_not_found',
    ]);
    expect(await codes(unit, 'absent')).toEqual(['state_not_found', 'state_not_found']);
    await s.writer.deleteState(ADMIN, { unit, workspace: 'other' }, 'api');
    expect(await codes(unit, 'other')).toEqual(['state_not_found', 'state_not_found']);
    await s.units.deleteUnit(ADMIN, unit, 'api');
    expect(await codes(unit, 'default')).toEqual(['state_not_found', 'state_not_found']);
  });

  (ON_POSTGRES ? it : it.skip)(
    'read after write across two replicas: a version acknowledged by one is what the next GET on the other serves',
    async () => {
      const other: DataSource = await (db.connectAnother as () => Promise<DataSource>)();
      const b = buildServices(other, s.blobs);
      const unit = `reads/u-${++n}`;
      await write(s, unit, 1);
      // Each replica has read the state (and prepared its statement) before the next write.
      expect((await readAll(b, unit)).version.serial).toBe(1);
      for (let serial = 2; serial <= 6; serial++) {
        const [writer, reader] = serial % 2 === 0 ? [s, b] : [b, s];
        await readAll(reader, unit);
        const written = await write(writer, unit, serial);
        const got = await readAll(reader, unit);
        expect(got.version).toEqual(written.version);
        expect(got.text).toBe(tfState(serial, 'lineage-reads', { n: serial }));
      }
    },
  );

  (ON_POSTGRES ? it : it.skip)(
    'GETs of one state that arrive together share one statement, and never an answer older than a write acknowledged before they arrived',
    async () => {
      const unit = `reads/u-${++n}`;
      await write(s, unit, 1);
      await s.reader.current(ADMIN, { unit, workspace: 'default' });
      const sent = await sentStatementsOf(() =>
        Promise.all(
          Array.from({ length: 20 }, () => s.reader.current(ADMIN, { unit, workspace: 'default' })),
        ),
      );
      expect(sent).toHaveLength(1);
      // Another state read in the same turn is a read of its own.
      const other = `reads/u-${++n}`;
      await write(s, other, 4);
      let both: { serial: number | null }[] = [];
      const two = await sentStatementsOf(
        async () =>
          (both = await Promise.all([
            s.reader.current(ADMIN, { unit, workspace: 'default' }),
            s.reader.current(ADMIN, { unit: other, workspace: 'default' }),
          ])),
      );
      expect(both.map((v) => v.serial)).toEqual([1, 4]);
      expect(two).toHaveLength(2);

      // A read sent before a write was acknowledged (on another replica) and answered after it
      // must not be shared with a GET that arrived after the acknowledgement. The first answer of
      // the served statement is held back until a second one was sent (or, should none ever be,
      // for 2 s), so that read is still in flight when the write is acknowledged.
      const replica: DataSource = await (db.connectAnother as () => Promise<DataSource>)();
      const b = buildServices(replica, s.blobs);
      await b.reader.current(ADMIN, { unit, workspace: 'default' });
      const original = Client.prototype.query;
      let servedSent = 0;
      const held = jest.spyOn(Client.prototype, 'query').mockImplementation(function (
        this: Client,
        ...args: unknown[]
      ) {
        const answer = (original as (...a: unknown[]) => unknown).apply(this, args);
        const text = (args[0] as { text?: string } | undefined)?.text ?? '';
        if (!text.startsWith('SELECT v.version,')) return answer as never;
        servedSent++;
        if (servedSent > 1) return answer as never;
        const until = Date.now() + 2000;
        return (answer as Promise<unknown>).then(async (r) => {
          while (servedSent < 2 && Date.now() < until) await new Promise((t) => setTimeout(t, 5));
          return r;
        }) as never;
      });
      try {
        const before = b.reader.current(ADMIN, { unit, workspace: 'default' });
        while (servedSent === 0) await new Promise((r) => setImmediate(r));
        await write(s, unit, 2);
        const after = await b.reader.current(ADMIN, { unit, workspace: 'default' });
        expect((await before).serial).toBe(1);
        expect(after.serial).toBe(2);
        expect(servedSent).toBe(2);
      } finally {
        held.mockRestore();
      }
    },
  );
});
