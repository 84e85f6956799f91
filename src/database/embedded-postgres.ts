import { PGlite } from '@electric-sql/pglite';
import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { DataDirLock } from './data-dir-lock';
import { PgliteBridge } from './pglite-bridge';

/** The port number only names the socket file (`.s.PGSQL.<port>`); nothing listens on TCP. */
export const EMBEDDED_SOCKET_PORT = 5432;

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
  ) {}

  static async start(dataDir: string): Promise<EmbeddedPostgres> {
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
      // initdb grows PGlite's WebAssembly memory by ~500 MiB, and WebAssembly memory never
      // shrinks: initialise a new data dir in a short-lived child process instead.
      if (!existsSync(join(pgDir, 'PG_VERSION'))) await initInChildProcess(pgDir);
      const db = await PGlite.create({ dataDir: pgDir });
      const server = new PgliteBridge(db, socketPath);
      await server.start();
      return new EmbeddedPostgres(db, server, socketDir, dirLock);
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

function initInChildProcess(pgDir: string): Promise<void> {
  const script =
    'const { PGlite } = require(process.argv[1]);' +
    'PGlite.create({ dataDir: process.argv[2] }).then((db) => db.close())' +
    '.catch((e) => { console.error(e); process.exit(1); });';
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['-e', script, require.resolve('@electric-sql/pglite'), pgDir],
      (err, _stdout, stderr) =>
        err
          ? reject(new Error(`initialising the embedded database failed: ${stderr || err.message}`))
          : resolve(),
    );
  });
}
