import { randomBytes } from 'node:crypto';
import { mkdtemp, open, readdir, rm, stat } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { Readable } from 'node:stream';

import { assertBlobKey, BlobNotFoundError } from '../../src/storage/blob-store';
import { FsBlobStore, WRITE_BATCH_BYTES } from '../../src/storage/fs-blob.store';
import {
  MiB,
  describeBlobStoreContract,
  expectKeyRefused,
  expectNoBlob,
  patternBody,
  readAll,
  uniqueKey,
} from '../support/blob-store.contract';

async function tempRoot(): Promise<string> {
  return mkdtemp(path.join(tmpdir(), 'statehouse-fs-blob-'));
}

describeBlobStoreContract('fs', async () => {
  const dir = await tempRoot();
  const store = new FsBlobStore(path.join(dir, 'blobs'));
  return {
    store,
    teardown: async () => {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
});

describe('FsBlobStore', () => {
  let dir: string;
  let root: string;
  let store: FsBlobStore;

  beforeEach(async () => {
    dir = await tempRoot();
    root = path.join(dir, 'blobs');
    store = new FsBlobStore(root);
  });

  afterEach(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  const mode = async (p: string): Promise<number> => (await stat(p)).mode & 0o777;

  it('creates nothing until first used, then the root and .tmp with mode 0700', async () => {
    await expect(stat(root)).rejects.toMatchObject({ code: 'ENOENT' });
    await store.ping();
    expect(await mode(root)).toBe(0o700);
    expect(await mode(path.join(root, '.tmp'))).toBe(0o700);
  });

  it('stores the blob at root/<key> with mode 0600, new directories 0700', async () => {
    await store.put('states/abc/1', Readable.from([Buffer.from('state')]));
    const file = path.join(root, 'states', 'abc', '1');
    expect(await mode(file)).toBe(0o600);
    expect(await mode(path.join(root, 'states'))).toBe(0o700);
    expect(await mode(path.join(root, 'states', 'abc'))).toBe(0o700);
    expect((await readAll(await store.get('states/abc/1'))).toString()).toBe('state');
  });

  it('writes a body arriving in small chunks in few large writes (one per MiB), its bytes exact', async () => {
    const probe = await open(path.join(dir, 'probe'), 'w');
    const proto = Object.getPrototypeOf(probe) as FileHandle;
    await probe.close();
    const writev = jest.spyOn(proto, 'writev');
    const write = jest.spyOn(proto, 'write');
    try {
      const data = randomBytes(3 * MiB + 12345);
      const chunks: Buffer[] = [];
      for (let i = 0; i < data.length; i += 16 * 1024) chunks.push(data.subarray(i, i + 16 * 1024));
      await store.put('batched/blob', Readable.from(chunks));
      expect(writev.mock.calls.length + write.mock.calls.length).toBe(
        Math.ceil(data.length / WRITE_BATCH_BYTES),
      );
      expect((await readAll(await store.get('batched/blob'))).equals(data)).toBe(true);
    } finally {
      writev.mockRestore();
      write.mockRestore();
    }
  });

  it('leaves no temp files after a successful put', async () => {
    await store.put('ok/1', patternBody(1, 3 * MiB));
    expect(await readdir(path.join(root, '.tmp'))).toEqual([]);
  });

  it('leaves no temp files after a failed put', async () => {
    const error = new Error('boom');
    await expect(
      store.put('failed/1', patternBody(1, 3 * MiB, { failAfter: MiB, error })),
    ).rejects.toBe(error);
    expect(await readdir(path.join(root, '.tmp'))).toEqual([]);
    await expect(stat(path.join(root, 'failed'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('leaves no probe file behind after ping', async () => {
    await store.ping();
    await store.ping();
    expect(await readdir(path.join(root, '.tmp'))).toEqual([]);
  });

  it('does not show a blob while its put is still streaming', async () => {
    let release!: () => void;
    let reachedPause!: () => void;
    const paused = new Promise<void>((resolve) => (reachedPause = resolve));
    const gate = new Promise<void>((resolve) => (release = resolve));
    const put = store.put(
      'slow/1',
      patternBody(2, 2 * MiB, {
        pauseAfter: MiB,
        pause: () => {
          reachedPause();
          return gate;
        },
      }),
    );
    await paused;
    await expectNoBlob(store, 'slow/1');
    expect((await readdir(path.join(root, '.tmp'))).length).toBe(1);
    release();
    await expect(put).resolves.toEqual({ size: 2 * MiB });
    expect(await store.stat('slow/1')).toBe(2 * MiB);
  });

  it.each([
    '',
    '/etc/passwd',
    '../escape',
    'a/../../escape',
    'a//b',
    'a/',
    'a/./b',
    '..',
    '.',
    'a\0b',
    'a b',
    'ü',
    '.tmp/x',
    '.tmp',
  ])('refuses the bad key %j', (key) => expectKeyRefused(store, key));

  it('accepts dots inside segments, which are not traversal', () => {
    expect(() => assertBlobKey('a/.b/c..d/...')).not.toThrow();
    expect(() => assertBlobKey('.tmpx/a')).not.toThrow();
  });

  it('destroys the source when a put fails on a bad key', async () => {
    const source = Readable.from([Buffer.from('x')]);
    await expect(store.put('../x', source)).rejects.toThrow(/invalid blob key/);
    expect(source.destroyed).toBe(true);
  });

  it('removes directories a delete leaves empty, but not the root', async () => {
    await store.put('a/b/c', Readable.from([Buffer.from('1')]));
    await store.put('a/d', Readable.from([Buffer.from('2')]));
    await store.delete('a/b/c');
    await expect(stat(path.join(root, 'a', 'b'))).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await store.stat('a/d')).toBe(1);
    await store.delete('a/d');
    expect((await readdir(root)).sort()).toEqual(['.tmp']);
  });

  it('treats a directory as no blob', async () => {
    await store.put('dir/child', Readable.from([Buffer.from('1')]));
    await expectNoBlob(store, 'dir');
    await expect(store.get('dir/child/deeper')).rejects.toBeInstanceOf(BlobNotFoundError);
  });

  it('keeps serving a blob already opened by get after it is deleted', async () => {
    await store.put('open/1', Readable.from([Buffer.from('still here')]));
    const stream = await store.get('open/1');
    await store.delete('open/1');
    expect((await readAll(stream)).toString()).toBe('still here');
  });

  it('puts many blobs into one directory concurrently with deletes pruning it', async () => {
    const dirKey = uniqueKey('race');
    await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const key = `${dirKey}/${i}`;
        await store.put(key, Readable.from([Buffer.from(String(i))]));
        if (i % 2 === 0) await store.delete(key);
      }),
    );
    for (let i = 0; i < 20; i++) {
      expect(await store.stat(`${dirKey}/${i}`)).toBe(i % 2 === 0 ? undefined : String(i).length);
    }
  });
});

describe('FsBlobStore.removeStaleTemp', () => {
  it('removes only temp files older than the given age', async () => {
    const { mkdtemp, mkdir, writeFile, utimes, readdir: ls } = await import('node:fs/promises');
    const root = await mkdtemp(path.join(tmpdir(), 'fsblob-stale-'));
    const store = new FsBlobStore(root);
    await mkdir(path.join(root, '.tmp'), { recursive: true });
    await writeFile(path.join(root, '.tmp', 'old.part'), 'x');
    await writeFile(path.join(root, '.tmp', 'new.part'), 'y');
    const twoHoursAgo = new Date(Date.now() - 2 * 3600_000);
    await utimes(path.join(root, '.tmp', 'old.part'), twoHoursAgo, twoHoursAgo);
    expect(await store.removeStaleTemp(3600_000)).toBe(1);
    expect(await ls(path.join(root, '.tmp'))).toEqual(['new.part']);
    await rm(root, { recursive: true, force: true });
  });
});
