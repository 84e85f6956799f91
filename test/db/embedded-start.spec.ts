import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createDataSource } from '../../src/database/data-source';
import { ENTITIES } from '../../src/entities';
import { hostEmbedded, ON_POSTGRES } from '../support/database';

(ON_POSTGRES ? describe.skip : describe)('the embedded database as it starts', () => {
  let dir: string;
  beforeAll(() => (dir = mkdtempSync(join(tmpdir(), 'statehouse-embedded-start-'))));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  // PostgreSQL zeroes its shared memory on every start, byte by byte in PGlite's WebAssembly:
  // initdb's 128MB cost each start a few hundred ms (and its memory for good).
  it("runs with a small buffer cache, not initdb's 128MB, on a new and on an existing data dir", async () => {
    for (const origin of ['snapshot', 'existing']) {
      const host = await hostEmbedded(dir);
      try {
        expect(host.origin).toBe(origin);
        const ds = createDataSource({ socketDir: host.socketDir, poolSize: 1 }, ENTITIES);
        await ds.initialize();
        try {
          const [row] = await ds.query<{ shared_buffers: string }[]>('SHOW shared_buffers');
          expect(row.shared_buffers).toBe('16MB');
        } finally {
          await ds.destroy();
        }
      } finally {
        await host.stop();
      }
    }
  });

  // TypeORM asks for pgcrypto on connecting (`CREATE EXTENSION IF NOT EXISTS`), which PGlite
  // does not have: it failed on every start (TypeORM only warns), and PGlite's error recovery
  // made that one statement cost ~100 ms.
  it('connecting asks for no extension (PGlite has none to install)', async () => {
    const host = await hostEmbedded(dir);
    try {
      const ds = createDataSource({ socketDir: host.socketDir, poolSize: 1 }, ENTITIES);
      const logged = jest.spyOn(ds.logger, 'log');
      await ds.initialize();
      try {
        await ds.query('SELECT 1');
      } finally {
        await ds.destroy();
      }
      expect(logged.mock.calls.filter(([level]) => level === 'warn')).toEqual([]);
    } finally {
      await host.stop();
    }
  });
});
