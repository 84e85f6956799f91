/**
 * The embedded data directory's guard is an OS lock, not a pid file: it is refused while any
 * other process holds it (whatever pid the directory records), and free the instant the holder
 * dies. The holder runs in a child process with the compiled module, as a second server would.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataDirInUseError, DataDirLock, LOCK_FILE } from '../../src/database/data-dir-lock';
import { ROOT } from '../support/paths';

const COMPILED = join(ROOT, 'dist', 'src', 'database', 'data-dir-lock.js');

/** A process that takes the lock and holds it until killed; resolves once it holds it. */
async function holder(dir: string): Promise<ChildProcess> {
  const script =
    'require(process.argv[1]).DataDirLock.acquire(process.argv[2])' +
    '.then(() => { process.stdout.write("held\\n"); setInterval(() => {}, 1000); },' +
    ' (e) => { process.stderr.write(e.message); process.exit(3); });';
  const child = spawn(process.execPath, ['-e', script, COMPILED, dir], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => d.toString().includes('held') && resolve());
    child.once('exit', (code) => reject(new Error(`holder exited ${code}: ${err}`)));
  });
  return child;
}

async function killed(child: ChildProcess): Promise<void> {
  const gone = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await gone;
}

describe('DataDirLock', () => {
  let dir: string;
  const children: ChildProcess[] = [];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'statehouse-dirlock-'));
  });
  afterEach(async () => {
    for (const c of children.splice(0)) if (c.exitCode === null) await killed(c);
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses a data dir another live process holds, in one line naming that pid and host', async () => {
    const other = await holder(dir);
    children.push(other);
    const attempt = DataDirLock.acquire(dir);
    await expect(attempt).rejects.toBeInstanceOf(DataDirInUseError);
    const e = (await attempt.catch((x: unknown) => x)) as Error;
    expect(e.message).toBe(
      `the data directory ${dir} is in use by another Statehouse process ` +
        `(pid ${other.pid} on host ${hostname()} since ${/since (\S+)/.exec(readFileSync(join(dir, LOCK_FILE), 'utf8'))?.[1]}): ` +
        'the embedded database serves one process — use DATABASE_URL for several replicas',
    );
    expect(e.stack).toBe(e.message); // printed as is: no stack trace for an operator's situation
    // The refusal changed nothing: the holder's note is intact.
    expect(readFileSync(join(dir, LOCK_FILE), 'utf8')).toMatch(new RegExp(`^pid ${other.pid} `));
  });

  it('is refused whatever pid the directory records: a pid that means nothing here (another container) does not open it', async () => {
    const other = await holder(dir);
    children.push(other);
    const gone = spawn(process.execPath, ['-e', '']);
    await new Promise((r) => gone.once('exit', r));
    writeFileSync(join(dir, LOCK_FILE), `pid ${gone.pid} on host other-container since then\n`);
    writeFileSync(join(dir, 'statehouse.pid'), `${gone.pid}\n`);
    await expect(DataDirLock.acquire(dir)).rejects.toThrow(
      /is in use by another Statehouse process \(pid \d+ on host other-container since then\)/,
    );
  });

  it('is free the instant its holder is SIGKILLed: no stale file to judge or clean up', async () => {
    const other = await holder(dir);
    await killed(other);
    expect(existsSync(join(dir, LOCK_FILE))).toBe(true); // left behind, and harmless
    const mine = await DataDirLock.acquire(dir);
    expect(readFileSync(join(dir, LOCK_FILE), 'utf8')).toMatch(new RegExp(`^pid ${process.pid} `));
    await mine.release();
  });

  it('opens a directory whose files name a live process that holds no lock (a restarted container reuses pids)', async () => {
    writeFileSync(join(dir, LOCK_FILE), `pid ${process.ppid} on host ${hostname()} since then\n`);
    writeFileSync(join(dir, 'statehouse.pid'), `${process.ppid}\n`);
    const mine = await DataDirLock.acquire(dir);
    expect(existsSync(join(dir, 'statehouse.pid'))).toBe(false); // the old pid file is gone
    await mine.release();
  });

  it('is not taken twice within one process, and is free again after release', async () => {
    const first = await DataDirLock.acquire(dir);
    await expect(DataDirLock.acquire(dir)).rejects.toThrow(
      `the data directory ${dir} is in use by this process already`,
    );
    // The refusal did not drop the lock: another process is still refused.
    await expect(holder(dir)).rejects.toThrow(/holder exited 3: .*in use by another/);
    await first.release();
    await first.release(); // idempotent
    const again = await DataDirLock.acquire(dir);
    await again.release();
  });
});
