import type { NodeFS as NodeFSClass } from '@electric-sql/pglite/dist/fs/nodefs';
import { closeSync, fsyncSync, openSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

// The package exports its Node file system only as a subpath, which this project's module
// resolution cannot name for types: the class is typed from its declaration file.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { NodeFS } = require('@electric-sql/pglite/nodefs') as { NodeFS: typeof NodeFSClass };

/**
 * PGlite's Node file system with a working fsync. PGlite starts PostgreSQL with fsync off
 * (`-F` among its default start parameters), and under it Emscripten's Node file system has no
 * fsync at all: a commit was written to the OS's cache and acknowledged, and only a process
 * crash was survived — a power cut or kernel crash could lose acknowledged writes or leave a
 * cluster whose checkpoint reached the disk before its pages. With this file system and fsync
 * on (`DURABLE_START_PARAMS`), PostgreSQL's own fsyncs reach the disk: the WAL at every commit
 * (`wal_sync_method=fsync`, as Emscripten's fdatasync does nothing), the data files at every
 * checkpoint, and the directories it syncs after creating files.
 */

/** What a Node file system stream of Emscripten's carries (its Node descriptor, for files). */
interface NodefsStream {
  nfd?: number;
  node: unknown;
}

interface NodefsApi {
  stream_ops: { fsync?: (stream: NodefsStream) => number };
  realPath(node: unknown): string;
}

interface EmscriptenModule {
  FS: {
    filesystems: { NODEFS: NodefsApi };
    /** The error Emscripten's system calls turn into an errno for the caller. */
    ErrnoError: new (errno: number) => Error;
  };
}

/** EIO in Emscripten's errno numbering (its ERRNO_CODES). */
const EMSCRIPTEN_EIO = 29;

type EmscriptenOpts = { preRun?: ((mod: EmscriptenModule) => void)[] } & Record<string, unknown>;

/** How many fsyncs PostgreSQL asked for through `DurableNodeFS`, in this process (tests). */
export const durableFsyncs = { count: 0 };

/** fsync(2) of what a stream names: its Node descriptor, or a directory opened for the call. */
export function fsyncStream(nodefs: NodefsApi, stream: NodefsStream): number {
  durableFsyncs.count++;
  if (stream.nfd !== undefined) {
    fsyncSync(stream.nfd);
    return 0;
  }
  syncPath(nodefs.realPath(stream.node));
  return 0;
}

export class DurableNodeFS extends NodeFS {
  override async init(
    pg: Parameters<NodeFSClass['init']>[0],
    opts: Parameters<NodeFSClass['init']>[1],
  ): Promise<Awaited<ReturnType<NodeFSClass['init']>>> {
    const result = await super.init(pg, opts);
    const emscriptenOpts = result.emscriptenOpts as EmscriptenOpts;
    // Before the data dir is mounted and any file opened: every stream then has the fsync.
    emscriptenOpts.preRun = [
      (mod) => {
        const nodefs = mod.FS.filesystems.NODEFS;
        nodefs.stream_ops.fsync = (stream) => {
          try {
            return fsyncStream(nodefs, stream);
          } catch {
            // A failed fsync reaches PostgreSQL as fsync(2)'s EIO, which it answers by stopping
            // (a PANIC, as data_sync_retry is off) rather than trusting pages it cannot flush;
            // any other exception would unwind through the WebAssembly mid-statement.
            throw new mod.FS.ErrnoError(EMSCRIPTEN_EIO);
          }
        };
      },
      ...(emscriptenOpts.preRun ?? []),
    ];
    return result;
  }
}

/**
 * PGlite's default start parameters with fsync on: without `-F` (fsync off), and with the WAL
 * flushed by fsync, which `DurableNodeFS` makes real (Emscripten's fdatasync does nothing).
 */
export function durableStartParams(defaults: readonly string[]): string[] {
  return [...defaults.filter((p) => p !== '-F'), '-c', 'wal_sync_method=fsync'];
}

/**
 * Every file and directory under `dir` fsynced, deepest first, `dir` last: a cluster unpacked
 * or made by initdb (neither syncs what it writes) is on the disk before it is renamed into
 * place, so a power cut never leaves a `pg` that is only partly there.
 */
export function syncTree(dir: string): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) syncTree(path);
    else if (entry.isFile()) syncPath(path);
  }
  syncPath(dir);
}

/** fsync(2) of a file or directory by its path. */
export function syncPath(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
