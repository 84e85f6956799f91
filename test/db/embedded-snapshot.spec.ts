import { spawn } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MIGRATIONS } from '../../migrations';
import { createDataSource } from '../../src/database/data-source';
import { migrateUnderLock } from '../../src/database/migrator';
import { ENTITIES } from '../../src/entities';
import { hostEmbedded, ON_POSTGRES } from '../support/database';
import { ROOT } from '../support/paths';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** The one the build wrote for the installed PGlite (global setup builds). */
const SNAPSHOTS = join(ROOT, 'dist', 'pglite');

/** Migrates the embedded database at `socketDir`, writes a row and reads it back. */
async function migrateAndUse(socketDir: string): Promise<{ applied: number; read: string }> {
  const ds = createDataSource({ socketDir, poolSize: 1 }, ENTITIES);
  await ds.initialize();
  try {
    const applied = (await migrateUnderLock(ds)).length;
    await ds.query('INSERT INTO settings (key, value) VALUES ($1, $2)', ['snapshot-test', 'kept']);
    const [row] = await ds.query<{ value: string }[]>('SELECT value FROM settings WHERE key = $1', [
      'snapshot-test',
    ]);
    return { applied, read: row.value };
  } finally {
    await ds.destroy();
  }
}

(ON_POSTGRES ? describe.skip : describe)('a new embedded data dir', () => {
  const dirs: string[] = [];
  const tempDir = () => {
    const d = mkdtempSync(join(tmpdir(), 'statehouse-snapshot-'));
    dirs.push(d);
    return d;
  };
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

  it('is loaded from the build snapshot, then migrated as on any start, and works', async () => {
    const dir = tempDir();
    const host = await hostEmbedded(dir);
    try {
      expect(host.origin).toBe('snapshot');
      expect(await migrateAndUse(host.socketDir)).toEqual({
        applied: MIGRATIONS.length,
        read: 'kept',
      });
    } finally {
      await host.stop();
    }
    const again = await hostEmbedded(dir);
    expect(again.origin).toBe('existing');
    await again.stop();
  });

  it('a snapshot of another PGlite version is not loaded: initdb makes the cluster', async () => {
    const snapshots = tempDir();
    const [current] = readdirSync(SNAPSHOTS).filter((n) => n.endsWith('.tar.gz'));
    copyFileSync(join(SNAPSHOTS, current), join(snapshots, 'pglite-0.0.1.tar.gz'));
    const host = await hostEmbedded(tempDir(), snapshots);
    try {
      expect(host.origin).toBe('initdb');
      expect(await migrateAndUse(host.socketDir)).toEqual({
        applied: MIGRATIONS.length,
        read: 'kept',
      });
    } finally {
      await host.stop();
    }
  });

  it('a damaged snapshot is not half loaded: initdb makes the cluster, nothing else is left', async () => {
    const snapshots = tempDir();
    const [current] = readdirSync(SNAPSHOTS).filter((n) => n.endsWith('.tar.gz'));
    const whole = readFileSync(join(SNAPSHOTS, current));
    writeFileSync(join(snapshots, current), whole.subarray(0, Math.floor(whole.length / 2)));
    const dir = tempDir();
    const host = await hostEmbedded(dir, snapshots);
    try {
      expect(host.origin).toBe('initdb');
      expect(readdirSync(dir).filter((n) => n.startsWith('pg.'))).toEqual([]);
      expect((await migrateAndUse(host.socketDir)).read).toBe('kept');
    } finally {
      await host.stop();
    }
  });

  it('the cluster unpacked from the snapshot is readable by its owner only', async () => {
    const dir = tempDir();
    const host = await hostEmbedded(dir);
    try {
      expect(host.origin).toBe('snapshot');
      expect(statSync(join(dir, 'pg')).mode & 0o077).toBe(0);
      expect(statSync(join(dir, 'pg', 'base')).mode & 0o077).toBe(0);
      expect(statSync(join(dir, 'pg', 'PG_VERSION')).mode & 0o077).toBe(0);
    } finally {
      await host.stop();
    }
  });

  it('a start killed while it loads the snapshot leaves a data dir the next start completes', async () => {
    const dir = tempDir();
    // Its own process group, killed whole, as a crash or an OOM kill of the container would.
    const host = spawn(process.execPath, [join(ROOT, 'test/support/pglite-host.js'), dir], {
      stdio: 'ignore',
      detached: true,
    });
    const exited = new Promise((r) => host.once('exit', r));
    const creating = () =>
      (existsSync(dir) ? readdirSync(dir) : []).filter((n) => n.startsWith('pg.creating-'));
    // Killed once part of the cluster is written.
    while (creating().length === 0 || readdirSync(join(dir, creating()[0])).length === 0) {
      await sleep(5);
    }
    process.kill(-host.pid!, 'SIGKILL');
    await exited;
    expect(creating()).toHaveLength(1);
    expect(existsSync(join(dir, 'pg', 'PG_VERSION'))).toBe(false);
    // And what an initdb of an earlier version, killed half-way, left: pg/ without PG_VERSION.
    mkdirSync(join(dir, 'pg', 'base'), { recursive: true });
    writeFileSync(join(dir, 'pg', 'postgresql.conf'), '# half written\n');

    const next = await hostEmbedded(dir);
    try {
      expect(next.origin).toBe('snapshot');
      expect(creating()).toEqual([]);
      expect((await migrateAndUse(next.socketDir)).read).toBe('kept');
    } finally {
      await next.stop();
    }
  });
});
