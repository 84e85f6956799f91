import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createDataSource } from '../../src/database/data-source';
import { ENTITIES } from '../../src/entities';
import { hostEmbedded, ON_POSTGRES } from '../support/database';
import { ROOT } from '../support/paths';

/**
 * An acknowledged write survives a power cut, not only a process crash: the embedded database
 * runs with fsync on, and its fsyncs reach the disk. PGlite's defaults turn fsync off, and under
 * them Emscripten's Node file system does nothing on fsync, so a commit only reached the OS's
 * cache.
 */

jest.setTimeout(120_000);

(ON_POSTGRES ? describe.skip : describe)('the embedded database is durable', () => {
  let dir: string;
  beforeAll(() => (dir = fs.mkdtempSync(join(tmpdir(), 'statehouse-durable-'))));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('runs with fsync on and the WAL flushed by fsync', async () => {
    const host = await hostEmbedded(join(dir, 'served'));
    try {
      const ds = createDataSource({ socketDir: host.socketDir, poolSize: 1 }, ENTITIES);
      await ds.initialize();
      try {
        const [row] = await ds.query<{ fsync: string; method: string; commit: string }[]>(
          `SELECT current_setting('fsync') AS fsync,
                  current_setting('wal_sync_method') AS method,
                  current_setting('synchronous_commit') AS commit`,
        );
        expect(row).toEqual({ fsync: 'on', method: 'fsync', commit: 'on' });
      } finally {
        await ds.destroy();
      }
    } finally {
      await host.stop();
    }
  });

  it('fsyncs the WAL to the disk at every commit, through Node', () => {
    const run = spawnSync(
      process.execPath,
      [join(ROOT, 'test/support/pglite-fsyncs.js'), join(dir, 'direct')],
      { encoding: 'utf8', timeout: 100_000 },
    );
    expect(run.stderr).toBe('');
    const counts = JSON.parse(run.stdout) as Record<
      'writes' | 'read',
      Record<'asked' | 'real', number>
    >;
    // At least one fsync per commit, each a real fsync(2) of a file Node holds open.
    expect(counts.writes.asked).toBeGreaterThanOrEqual(5);
    expect(counts.writes.real).toBeGreaterThanOrEqual(counts.writes.asked);
    // A read commits nothing to flush.
    expect(counts.read).toEqual({ asked: 0, real: 0 });
  });
});
