import { Logger } from '@nestjs/common';
import { PGlite } from '@electric-sql/pglite';
import { execFile } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  renameSync,
  rmSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { DataDirLock } from './data-dir-lock';
import { PgliteBridge } from './pglite-bridge';
import { DurableNodeFS, durableStartParams, syncPath, syncTree } from './pglite-durable-fs';
import { WatchedTables } from './statement-changes';
import { precompiledPglite } from './pglite-precompile';
import { DEFAULT_SNAPSHOT_DIR, snapshotFile } from './pglite-snapshot';
import { SnapshotUnpackError, unpackSnapshot } from './snapshot-unpack';

/** The port number only names the socket file (`.s.PGSQL.<port>`); nothing listens on TCP. */
export const EMBEDDED_SOCKET_PORT = 5432;

/**
 * PostgreSQL's buffer cache of the embedded database. initdb writes 128MB into postgresql.conf;
 * PostgreSQL zeroes its shared memory at every start, and PGlite's WebAssembly does that one
 * byte range after another: at 128MB that `memset` alone is a few hundred ms of every start, and
 * the memory stays taken (WebAssembly memory never shrinks). The embedded database holds the
 * metadata of one installation (state bytes live in the blob store), far less than this.
 */
export const EMBEDDED_SHARED_BUFFERS = '16MB';

/**
 * PGlite's own start parameters with fsync on (`durableStartParams`, made real by
 * `DurableNodeFS`), and the settings above (a `-c` wins over postgresql.conf).
 */
export const EMBEDDED_START_PARAMS = [
  ...durableStartParams(PGlite.defaultStartParams),
  '-c',
  `shared_buffers=${EMBEDDED_SHARED_BUFFERS}`,
];

/** How the database in the data dir came to be: `existing`, or made now from what. */
export type EmbeddedOrigin = 'existing' | 'snapshot' | 'initdb';

export interface EmbeddedOptions {
  /** Where the PGlite snapshot is looked for (tests); default `dist/pglite`. */
  snapshotDir?: string;
  /** The tables whose changes `changes` counts (`DataChanges`); none when absent. */
  watched?: WatchedTables;
}

/** The temporary directory a new cluster is made in, beside `pg/`. */
const CREATING_PREFIX = 'pg.creating-';

/**
 * The embedded database: PGlite (PostgreSQL in WebAssembly) in `<dataDir>/pg`, served on a Unix
 * socket in `<dataDir>/run` (mode 0700, never a TCP port) so the ordinary `pg` driver can use it
 * through a one-connection pool (`PgliteBridge`). One connection means each transaction has PGlite's single
 * session to itself; a driver that shared the session would interleave concurrent transactions.
 */
export class EmbeddedPostgres {
  private constructor(
    private readonly db: PGlite,
    private readonly server: PgliteBridge,
    readonly socketDir: string,
    private readonly dirLock: DataDirLock,
    readonly origin: EmbeddedOrigin,
  ) {}

  static async start(dataDir: string, options: EmbeddedOptions = {}): Promise<EmbeddedPostgres> {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    // PGlite must never be opened by two processes at once: an OS lock on the data dir decides.
    const dirLock = await DataDirLock.acquire(dataDir);
    try {
      const socketDir = join(dataDir, 'run');
      mkdirSync(socketDir, { recursive: true, mode: 0o700 });
      chmodSync(socketDir, 0o700);
      const socketPath = join(socketDir, `.s.PGSQL.${EMBEDDED_SOCKET_PORT}`);
      rmSync(socketPath, { force: true }); // left behind by a process that was killed
      const pgDir = join(dataDir, 'pg');
      const origin = existsSync(join(pgDir, 'PG_VERSION'))
        ? 'existing'
        : await createCluster(pgDir, options.snapshotDir ?? DEFAULT_SNAPSHOT_DIR);
      const pgliteWasmModule = await precompiledPglite();
      const db = await PGlite.create({
        fs: new DurableNodeFS(pgDir),
        startParams: EMBEDDED_START_PARAMS,
        ...(pgliteWasmModule && { pgliteWasmModule }),
      });
      const server = new PgliteBridge(db, socketPath, options.watched ?? new WatchedTables());
      await server.start();
      return new EmbeddedPostgres(db, server, socketDir, dirLock, origin);
    } catch (e) {
      await dirLock.release();
      throw e;
    }
  }

  /** See `PgliteBridge.changes`. */
  get changes(): number {
    return this.server.changes;
  }

  async stop(): Promise<void> {
    try {
      await this.server.stop();
      await this.db.close();
    } finally {
      await this.dirLock.release();
    }
  }
}

/**
 * Makes a new, empty cluster at `pgDir` (the migrations run afterwards, as on any start): loaded
 * from the build's snapshot of a freshly initialised cluster when there is one for this PGlite
 * (unpacked here, a fraction of a second), else — or when the snapshot is damaged — by initdb
 * (several seconds). Either way it is made in a directory beside
 * `pgDir` and renamed into place, so `PG_VERSION` in `pgDir` means complete: a crash half-way
 * leaves only that directory, which the next start removes before it begins again.
 *
 * Every install loaded from one snapshot has the same PostgreSQL system identifier. It only
 * tells clusters apart for physical replication and WAL archives, which the embedded database
 * never has: one process opens it, and it is backed up by copying the stopped directory, which
 * does not look at the identifier (nor would a logical dump).
 */
async function createCluster(pgDir: string, snapshotDir: string): Promise<EmbeddedOrigin> {
  const parent = dirname(pgDir);
  for (const name of readdirSync(parent)) {
    // Best effort: a new one gets a name of its own, so one that stays in the way harms nothing.
    if (name.startsWith(CREATING_PREFIX)) {
      try {
        rmSync(join(parent, name), { recursive: true });
      } catch {
        // removed by the next start
      }
    }
  }
  // Without PG_VERSION no PostgreSQL opens it: what is there was left by an initdb that stopped.
  rmSync(pgDir, { recursive: true, force: true });
  const snapshot = snapshotFile(snapshotDir);
  if (existsSync(snapshot)) {
    const creating = mkdtempSync(join(parent, CREATING_PREFIX));
    try {
      unpackSnapshot(snapshot, creating);
      syncTree(creating);
      renameSync(creating, pgDir);
      syncPath(parent);
      return 'snapshot';
    } catch (e) {
      // A damaged snapshot costs the start its speed, not the database: initdb makes it.
      if (!(e instanceof SnapshotUnpackError)) throw e;
      new Logger('database').warn(`${e.message}; making the embedded database by initdb instead`);
    } finally {
      rmSync(creating, { recursive: true, force: true });
    }
  }
  const creating = mkdtempSync(join(parent, CREATING_PREFIX));
  try {
    await initdbInChildProcess(creating);
    syncTree(creating);
    renameSync(creating, pgDir);
    syncPath(parent);
  } finally {
    rmSync(creating, { recursive: true, force: true });
  }
  return 'initdb';
}

/**
 * initdb grows PGlite's WebAssembly memory by ~500 MiB, and WebAssembly memory never shrinks: it
 * runs in a short-lived child process. (The snapshot needs no PGlite to be loaded: it is
 * unpacked in this process, see `unpackSnapshot`.)
 */
function initdbInChildProcess(dir: string): Promise<void> {
  const script =
    'const { PGlite } = require(process.argv[1]);' +
    'PGlite.create({ dataDir: process.argv[2] }).then((db) => db.close())' +
    '.catch((e) => { console.error(e); process.exit(1); });';
  const args = [require.resolve('@electric-sql/pglite'), dir];
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['-e', script, ...args], (err, _stdout, stderr) =>
      err
        ? reject(new Error(`initialising the embedded database failed: ${stderr || err.message}`))
        : resolve(),
    );
  });
}
