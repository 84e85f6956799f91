import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { StartupError } from '../common/startup';

/** The port number only names the socket file (`.s.PGSQL.<port>`); nothing listens on TCP. */
export const EMBEDDED_SOCKET_PORT = 5432;

/**
 * The embedded database: PGlite (PostgreSQL in WebAssembly) in `<dataDir>/pg`, served on a Unix
 * socket in `<dataDir>/run` (mode 0700, never a TCP port) so the ordinary `pg` driver can use it
 * through a one-connection pool. One connection means each transaction has PGlite's single
 * session to itself; a driver that shared the session would interleave concurrent transactions.
 */
export class EmbeddedPostgres {
  private constructor(
    private readonly db: PGlite,
    private readonly server: PGLiteSocketServer,
    readonly socketDir: string,
    private readonly pidFile: string,
  ) {}

  static async start(dataDir: string): Promise<EmbeddedPostgres> {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    const pidFile = join(dataDir, 'statehouse.pid');
    claimDataDir(pidFile);
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
      const server = new PGLiteSocketServer({ db, path: socketPath, maxConnections: 1 });
      await server.start();
      return new EmbeddedPostgres(db, server, socketDir, pidFile);
    } catch (e) {
      rmSync(pidFile, { force: true });
      throw e;
    }
  }

  async stop(): Promise<void> {
    await this.server.stop();
    await this.db.close();
    rmSync(this.pidFile, { force: true });
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

/**
 * PGlite must never be opened by two processes at once. A pid file whose process is gone is
 * taken over; a live one stops the start with a clear message.
 */
function claimDataDir(pidFile: string): void {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(pidFile, `${process.pid}\n`, { flag: 'wx', mode: 0o600 });
      return;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      const pid = Number(readFileSync(pidFile, 'utf8').trim());
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && isAlive(pid)) {
        throw new StartupError(
          `the data directory is in use by another Statehouse process (pid ${pid}, ${dirname(pidFile)}); ` +
            'the embedded database serves one process — use DATABASE_URL for several replicas',
        );
      }
      rmSync(pidFile, { force: true });
    }
  }
  throw new Error(`cannot claim ${pidFile}`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
