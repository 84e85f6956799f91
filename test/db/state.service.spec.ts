import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { DomainError } from '../../src/common/errors';
import { BlobStore } from '../../src/storage/blob-store';
import { MemoryBlobStore } from '../../src/storage/memory-blob.store';
import { openTestDatabase, TestDatabase } from '../support/database';
import { FIXTURES } from '../support/paths';
import {
  ADMIN,
  ALICE,
  BOB,
  body,
  buildServices,
  readAll,
  Services,
  tfState,
} from '../support/services';

const ws = 'default';

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    if (e instanceof DomainError) return e.code;
    throw e;
  }
  throw new Error('expected a DomainError, got success');
}

describe('state service on a real database', () => {
  let db: TestDatabase;
  let blobs: MemoryBlobStore;
  let s: Services;
  let n = 0;
  let unit: string;

  beforeAll(async () => {
    db = await openTestDatabase();
  });
  afterAll(async () => {
    await db.close();
  });
  beforeEach(() => {
    blobs = new MemoryBlobStore();
    s = buildServices(db.dataSource, blobs);
    unit = `team/app-${++n}`;
  });
  afterEach(() => {
    jest.restoreAllMocks();
  });

  const write = (
    text: string | Buffer,
    principal = ADMIN,
    extra: Partial<Parameters<Services['writer']['write']>[0]> = {},
  ) => s.writer.write({ unit, workspace: ws, principal, door: 'api', body: body(text), ...extra });

  const currentText = async (): Promise<string> =>
    (await readAll((await s.reader.openCurrent(ADMIN, { unit, workspace: ws })).body)).toString();

  it('stores each accepted write as a numbered version, byte for byte', async () => {
    const v1 = await write(tfState(1));
    const v2 = await write(tfState(2));
    expect([v1.version.version, v2.version.version]).toEqual([1, 2]);
    expect(v2.version).toMatchObject({
      serial: 2,
      lineage: 'lineage-1',
      door: 'api',
      createdBy: 'bootstrap-admin',
    });
    expect(await currentText()).toBe(tfState(2));
    const old = await s.reader.openVersion(ADMIN, { unit, workspace: ws }, 1);
    expect((await readAll(old.body)).toString()).toBe(tfState(1));
    const list = await s.reader.listVersions(ADMIN, { unit, workspace: ws }, 10, undefined);
    expect(list.items.map((v) => v.version)).toEqual([2, 1]);
  });

  it('stores a real Terraform state exactly and reads its outputs', async () => {
    const raw = readFileSync(join(FIXTURES, 'simple.tfstate'));
    await write(raw);
    expect(Buffer.compare(Buffer.from(await currentText()), raw)).toBe(0);
    const outputs = await s.reader.outputs(ADMIN, { unit, workspace: ws });
    const parsed = JSON.parse(raw.toString()) as {
      serial: number;
      outputs: Record<string, unknown>;
    };
    expect(outputs.serial).toBe(parsed.serial);
    expect(outputs.outputs).toEqual(parsed.outputs);
  });

  it('refuses a lower serial and the same serial with other bytes, keeping the current version', async () => {
    await write(tfState(5, 'l', { a: '1' }));
    expect(await codeOf(write(tfState(4, 'l')))).toBe('serial_conflict');
    expect(await codeOf(write(tfState(5, 'l', { a: '2' })))).toBe('serial_conflict');
    expect(await currentText()).toBe(tfState(5, 'l', { a: '1' }));
    expect(blobs.keys()).toHaveLength(1);
  });

  it('accepts a lineage change and records it', async () => {
    await write(tfState(9, 'old'));
    const r = await write(tfState(1, 'new'));
    expect(r.created).toBe(true);
    expect(r.version).toMatchObject({ serial: 1, lineage: 'new', version: 2 });
  });

  it('creates no version for a byte-identical write and keeps no extra blob', async () => {
    await write(tfState(1));
    const again = await write(tfState(1));
    expect(again.created).toBe(false);
    expect(again.version.version).toBe(1);
    expect(blobs.keys()).toHaveLength(1);
  });

  it('stores an OpenTofu encrypted state opaque, without serial checks', async () => {
    const raw = readFileSync(join(FIXTURES, 'opentofu-encrypted.HANDMADE.tfstate'));
    const r = await write(raw);
    expect(r.version).toMatchObject({ encrypted: true, serial: null, lineage: null });
    expect(Buffer.compare(Buffer.from(await currentText()), raw)).toBe(0);
    expect(await codeOf(s.reader.outputs(ADMIN, { unit, workspace: ws }))).toBe('state_encrypted');
  });

  it.each([
    ['not JSON', 'hello'],
    ['a JSON array', '[1,2]'],
    ['a version 3 state', JSON.stringify({ version: 3, serial: 1, lineage: 'x' })],
    ['an empty body', ''],
    ['truncated JSON', tfState(1).slice(0, 40)],
  ])('refuses %s with invalid_state and stores nothing', async (_label, text) => {
    expect(await codeOf(write(text))).toBe('invalid_state');
    expect(blobs.keys()).toHaveLength(0);
    expect(await codeOf(s.reader.current(ADMIN, { unit, workspace: ws }))).toBe('state_not_found');
  });

  it('refuses a body over STATEHOUSE_MAX_STATE_BYTES while streaming, storing nothing', async () => {
    s = buildServices(db.dataSource, blobs, { STATEHOUSE_MAX_STATE_BYTES: '1KiB' });
    const big = tfState(1, 'l', { pad: 'x'.repeat(4000) });
    expect(await codeOf(write(big))).toBe('too_large');
    expect(await codeOf(write(big, ADMIN, { contentLength: big.length }))).toBe('too_large');
    expect(blobs.keys()).toHaveLength(0);
  });

  it('refuses a Content-MD5 that does not match, storing nothing', async () => {
    const wrong = Buffer.from('0123456789abcdef').toString('base64');
    expect(await codeOf(write(tfState(1), ADMIN, { contentMd5: wrong }))).toBe('checksum_mismatch');
    expect(blobs.keys()).toHaveLength(0);
    const { createHash } = await import('node:crypto');
    const right = createHash('md5').update(tfState(1)).digest('base64');
    expect((await write(tfState(1), ADMIN, { contentMd5: right })).created).toBe(true);
  });

  describe('restore', () => {
    it('makes an old version current as a new version with the same bytes and blob', async () => {
      await write(tfState(1, 'l', { a: 'one' }));
      await write(tfState(2, 'l', { a: 'two' }));
      const r = await s.writer.restore(ADMIN, { unit, workspace: ws }, 1);
      expect(r.version).toMatchObject({ version: 3, serial: 1, restoredFrom: 1 });
      expect(await currentText()).toBe(tfState(1, 'l', { a: 'one' }));
      expect(blobs.keys()).toHaveLength(2);
      // Terraform's next apply writes serial 2 of the restored lineage: accepted.
      const next = await write(tfState(2, 'l', { a: 'three' }));
      expect(next.version.version).toBe(4);
      expect(s.audit.events.map((e) => e.type)).toContain('state.restore');
    });

    it('answers created=false when the version already is current', async () => {
      await write(tfState(1));
      const r = await s.writer.restore(ADMIN, { unit, workspace: ws }, 1);
      expect(r.created).toBe(false);
    });

    it('is refused with the holder while another principal holds the lock', async () => {
      await write(tfState(1));
      await write(tfState(2));
      await s.locks.acquire(
        BOB,
        { unit, workspace: ws },
        Buffer.from('{"ID":"bob-lock","Who":"bob"}'),
        { generateId: false },
      );
      const err = await s.writer
        .restore(ALICE, { unit, workspace: ws }, 1)
        .catch((e: DomainError) => e);
      expect(err).toBeInstanceOf(DomainError);
      expect((err as DomainError).code).toBe('locked');
      expect((err as DomainError).lock?.infoJson).toBe('{"ID":"bob-lock","Who":"bob"}');
      expect(await currentText()).toBe(tfState(2));
    });

    it('answers version_not_found for a version that never existed', async () => {
      await write(tfState(1));
      expect(await codeOf(s.writer.restore(ADMIN, { unit, workspace: ws }, 7))).toBe(
        'version_not_found',
      );
    });
  });

  describe('retention (STATEHOUSE_MAX_VERSIONS)', () => {
    it('keeps the newest N versions and deletes blobs nothing refers to', async () => {
      s = buildServices(db.dataSource, blobs, { STATEHOUSE_MAX_VERSIONS: '2' });
      for (let i = 1; i <= 5; i++) await write(tfState(i));
      const list = await s.reader.listVersions(ADMIN, { unit, workspace: ws }, 10, undefined);
      expect(list.items.map((v) => v.version)).toEqual([5, 4]);
      expect(blobs.keys()).toHaveLength(2);
    });

    it('never deletes a blob a remaining version still shares', async () => {
      s = buildServices(db.dataSource, blobs, { STATEHOUSE_MAX_VERSIONS: '2' });
      await write(tfState(1, 'l', { a: 'one' }));
      await write(tfState(2, 'l', { a: 'two' }));
      await s.writer.restore(ADMIN, { unit, workspace: ws }, 1); // v3 shares v1's blob; v1 pruned
      const list = await s.reader.listVersions(ADMIN, { unit, workspace: ws }, 10, undefined);
      expect(list.items.map((v) => v.version)).toEqual([3, 2]);
      expect(await currentText()).toBe(tfState(1, 'l', { a: 'one' }));
      expect(blobs.keys()).toHaveLength(2);
    });
  });

  describe('soft delete, undelete and purge', () => {
    it('a deleted workspace state reads as no state, keeps its versions, and comes back on undelete', async () => {
      await write(tfState(1));
      await s.writer.deleteState(ADMIN, { unit, workspace: ws }, 'api');
      expect(await codeOf(s.reader.current(ADMIN, { unit, workspace: ws }))).toBe(
        'state_not_found',
      );
      const list = await s.reader.listVersions(ADMIN, { unit, workspace: ws }, 10, undefined);
      expect(list.items).toHaveLength(1);
      await s.units.undelete(ADMIN, unit, ws);
      expect(await currentText()).toBe(tfState(1));
    });

    it('a write after a delete starts again without the serial guard', async () => {
      await write(tfState(7, 'l'));
      await s.writer.deleteState(ADMIN, { unit, workspace: ws }, 'api');
      const r = await write(tfState(1, 'l'));
      expect(r.version).toMatchObject({ version: 2, serial: 1 });
    });

    it('refuses to delete a unit while it is locked, answering with the holder', async () => {
      await write(tfState(1));
      await s.locks.acquire(BOB, { unit, workspace: ws }, Buffer.from('{"ID":"L1"}'), {
        generateId: false,
      });
      const err = await s.units.deleteUnit(ADMIN, unit, 'api').catch((e: DomainError) => e);
      expect((err as DomainError).code).toBe('locked');
      expect((err as DomainError).lock?.id).toBe('L1');
      expect((await s.units.getUnit(ADMIN, unit)).name).toBe(unit);
    });

    it('a deleted unit keeps its history until purged; purge removes versions and blobs', async () => {
      await write(tfState(1));
      await write(tfState(2));
      expect(await codeOf(s.units.purge(ADMIN, unit, undefined))).toBe('not_deleted');
      await s.units.deleteUnit(ADMIN, unit, 'api');
      expect(await codeOf(s.units.getUnit(ADMIN, unit))).toBe('unit_not_found');
      expect(
        (await s.reader.listVersions(ADMIN, { unit, workspace: ws }, 10, undefined)).items,
      ).toHaveLength(2);
      expect(await codeOf(s.units.createUnit(ADMIN, unit))).toBe('unit_deleted');
      await s.units.undelete(ADMIN, unit, undefined);
      expect(await currentText()).toBe(tfState(2));
      await s.units.deleteUnit(ADMIN, unit, 'api');
      await s.units.purge(ADMIN, unit, undefined);
      expect(
        await codeOf(s.reader.listVersions(ADMIN, { unit, workspace: ws }, 10, undefined)),
      ).toBe('unit_not_found');
      expect(blobs.keys()).toHaveLength(0);
      expect(s.audit.events.map((e) => e.type)).toEqual(
        expect.arrayContaining(['unit.delete', 'unit.undelete', 'unit.purge']),
      );
    });

    it('purge is refused to a principal without unit.purge', async () => {
      await write(tfState(1));
      await s.units.deleteUnit(ADMIN, unit, 'api');
      expect(await codeOf(s.units.purge(ALICE, unit, undefined))).toBe('forbidden');
    });

    it('a door write to a deleted unit brings the unit back with only that workspace live', async () => {
      await write(tfState(1));
      await s.writer.write({
        unit,
        workspace: 'dev',
        principal: ADMIN,
        door: 'api',
        body: body(tfState(1, 'd')),
      });
      await s.units.deleteUnit(ADMIN, unit, 'api');
      await write(tfState(1, 'fresh'));
      const detail = await s.units.getUnit(ADMIN, unit);
      expect(detail.workspaces.map((w) => [w.workspace, w.deleted])).toEqual([
        ['default', false],
        ['dev', true],
      ]);
    });
  });

  describe('crash safety: a write interrupted at each step leaves the previous version current', () => {
    const assertPreviousIntact = async (): Promise<void> => {
      expect(await currentText()).toBe(tfState(1));
      const list = await s.reader.listVersions(ADMIN, { unit, workspace: ws }, 10, undefined);
      expect(list.items.map((v) => v.version)).toEqual([1]);
    };

    it('blob upload fails midway', async () => {
      await write(tfState(1));
      const failing: BlobStore = Object.create(blobs) as BlobStore;
      failing.put = async (key: string, src: Readable) => {
        for await (const _ of src) throw new Error('disk full');
        return blobs.put(key, src);
      };
      s = buildServices(db.dataSource, failing);
      await expect(write(tfState(2))).rejects.toThrow('disk full');
      await assertPreviousIntact();
      expect(blobs.keys()).toHaveLength(1);
    });

    it.each([['ensureLockedWriteTarget'], ['insertCurrentVersion']] as const)(
      'the repository fails at %s',
      async (step) => {
        await write(tfState(1));
        jest.spyOn(s.repo, step).mockRejectedValueOnce(new Error(`injected fault at ${step}`));
        await expect(write(tfState(2))).rejects.toThrow(`injected fault at ${step}`);
        await assertPreviousIntact();
        expect(blobs.keys()).toHaveLength(1);
        // And the state is still writable afterwards.
        expect((await write(tfState(2))).version.version).toBe(2);
      },
    );

    it('retention fails after the new version was inserted', async () => {
      s = buildServices(db.dataSource, blobs, { STATEHOUSE_MAX_VERSIONS: '1' });
      await write(tfState(1));
      jest
        .spyOn(s.repo, 'pruneVersions')
        .mockRejectedValueOnce(new Error('injected fault at prune'));
      await expect(write(tfState(2))).rejects.toThrow('injected fault at prune');
      await assertPreviousIntact();
    });

    it('a stored version whose blob is gone is a server error, never "no state"', async () => {
      await write(tfState(1));
      for (const k of blobs.keys()) await blobs.delete(k);
      expect(await codeOf(s.reader.openCurrent(ADMIN, { unit, workspace: ws }))).toBe(
        'blob_unreadable',
      );
    });
  });

  it('of concurrent writers starting from the same serial, exactly one is accepted', async () => {
    await write(tfState(1));
    const results = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) => write(tfState(2, 'lineage-1', { writer: String(i) }))),
    );
    const ok = results.filter((r) => r.status === 'fulfilled');
    const refused = results.filter(
      (r) => r.status === 'rejected' && (r.reason as DomainError).code === 'serial_conflict',
    );
    expect(ok).toHaveLength(1);
    expect(refused).toHaveLength(7);
    const list = await s.reader.listVersions(ADMIN, { unit, workspace: ws }, 10, undefined);
    expect(list.items.map((v) => v.version)).toEqual([2, 1]);
    expect(blobs.keys()).toHaveLength(2);
  });

  it('lists units by prefix with a cursor, page by page', async () => {
    const prefix = `list-${n}/`;
    for (const name of ['c', 'a', 'b', 'd', 'e'])
      await s.units.createUnit(ADMIN, `${prefix}${name}`);
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await s.units.listUnits(ADMIN, prefix, 2, cursor);
      seen.push(...page.items.map((u) => u.name));
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
    expect(seen).toEqual(['a', 'b', 'c', 'd', 'e'].map((x) => prefix + x));
    expect(await codeOf(s.units.listUnits(ADMIN, prefix, 2, 'not-a-cursor!'))).toBe(
      'invalid_request',
    );
  });
});
