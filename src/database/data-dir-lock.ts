import {
  closeSync,
  constants,
  ftruncateSync,
  openSync,
  readFileSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { lock, unlock } from 'os-lock';
import { StartupError } from '../common/startup';

/** The file whose lock says which process owns the embedded database of a data directory. */
export const LOCK_FILE = 'statehouse.lock';

/** Another process (or this one) already holds the data directory. */
export class DataDirInUseError extends StartupError {
  constructor(dataDir: string, holder: string) {
    super(
      `the data directory ${dataDir} is in use by ${holder}: ` +
        'the embedded database serves one process — use DATABASE_URL for several replicas',
    );
    this.name = 'DataDirInUseError';
    // An operator's situation, not a bug: the one line says it all, a stack trace would not help.
    this.stack = this.message;
  }
}

/** Data directories this process holds (POSIX record locks do not conflict within one process). */
const heldHere = new Set<string>();

/**
 * An exclusive lock on `<dataDir>/statehouse.lock`, held while the embedded database is open.
 *
 * It is an OS lock (a POSIX `fcntl` write lock, through the `os-lock` addon), not a pid file:
 * the kernel drops it the moment the holder exits, however it exits (SIGKILL, OOM kill, node
 * crash), so there is no stale file to judge; and it means the same thing across PID namespaces,
 * where a pid does not (two containers on one volume both run the server as pid 7, so a pid file
 * cannot tell "my own old file" from "a live server in the other container"). On NFS, Linux
 * carries `fcntl` locks to the server (NLM or NFSv4 locks), so two nodes sharing a volume are
 * refused too. The file's content (pid, host, time) only names the holder in the refusal.
 *
 * The descriptor stays open for the life of the lock: closing any descriptor of this file in
 * the holding process would release a POSIX lock, so nothing else here opens it.
 */
export class DataDirLock {
  private constructor(
    private readonly key: string,
    private fd: number | undefined,
  ) {}

  static async acquire(dataDir: string): Promise<DataDirLock> {
    const key = resolve(dataDir);
    const path = join(key, LOCK_FILE);
    // Not by reading the file: closing any descriptor of it here would drop this process's lock.
    if (heldHere.has(key)) throw new DataDirInUseError(key, 'this process already');
    const fd = openSync(path, constants.O_RDWR | constants.O_CREAT, 0o600);
    try {
      await lock(fd, { exclusive: true, immediate: true });
    } catch (e) {
      closeSync(fd);
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'EAGAIN' || code === 'EACCES') {
        throw new DataDirInUseError(key, `another Statehouse process (${describeHolder(path)})`);
      }
      throw new Error(
        `cannot lock ${path} (${code ?? (e as Error).message}): the data directory must be on a ` +
          'filesystem with POSIX record locks',
      );
    }
    heldHere.add(key);
    const note = `pid ${process.pid} on host ${hostname()} since ${new Date().toISOString()}\n`;
    ftruncateSync(fd, 0);
    writeSync(fd, note, 0);
    // The pid file of earlier versions means nothing now; leaving it would only mislead.
    rmSync(join(key, 'statehouse.pid'), { force: true });
    return new DataDirLock(key, fd);
  }

  async release(): Promise<void> {
    if (this.fd === undefined) return;
    const fd = this.fd;
    this.fd = undefined;
    try {
      await unlock(fd);
    } finally {
      closeSync(fd);
      heldHere.delete(this.key);
    }
  }
}

function describeHolder(path: string): string {
  try {
    const note = readFileSync(path, 'utf8').trim().split('\n')[0].slice(0, 200);
    return note === '' ? 'holder unknown' : note;
  } catch {
    return 'holder unknown';
  }
}
