import { PGlite } from '@electric-sql/pglite';
import { readdirSync, readFileSync, renameSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * Where the build leaves the snapshot: `dist/pglite`, beside `dist/src` (this file compiles to
 * `dist/src/database`), so the packed package ships it with the code that reads it.
 */
export const DEFAULT_SNAPSHOT_DIR = join(__dirname, '..', '..', 'pglite');

const SNAPSHOT_NAME = /^pglite-.+\.tar\.gz$/;

/** The installed PGlite's version (its package.json is not among the package's exports). */
export function pgliteVersion(): string {
  const entry = require.resolve('@electric-sql/pglite'); // <package>/dist/index.cjs
  const pkg = JSON.parse(readFileSync(join(dirname(entry), '..', 'package.json'), 'utf8')) as {
    version: string;
  };
  return pkg.version;
}

/**
 * The snapshot for the installed PGlite in `dir`. Keyed by the version in its name: a data dir
 * is only loaded from a cluster made by the very PGlite (and so PostgreSQL) that will open it.
 */
export function snapshotFile(dir: string = DEFAULT_SNAPSHOT_DIR): string {
  return join(dir, `pglite-${pgliteVersion()}.tar.gz`);
}

/**
 * Writes the snapshot of a freshly initialised, empty cluster (no migrations: a migrated one
 * would go stale with the next migration) into `dir`, replacing those of other PGlite versions.
 * Run by the build in a process of its own (scripts/pglite-snapshot.js): initdb grows the
 * WebAssembly memory by ~500 MiB for good.
 */
export async function writeSnapshot(dir: string = DEFAULT_SNAPSHOT_DIR): Promise<string> {
  const file = snapshotFile(dir);
  const db = await PGlite.create();
  let tarball: Blob;
  try {
    tarball = await db.dumpDataDir('gzip');
  } finally {
    await db.close();
  }
  mkdirSync(dir, { recursive: true });
  const partial = `${file}.partial`;
  writeFileSync(partial, Buffer.from(await tarball.arrayBuffer()));
  renameSync(partial, file);
  for (const name of readdirSync(dir)) {
    if (SNAPSHOT_NAME.test(name) && join(dir, name) !== file) rmSync(join(dir, name));
  }
  return file;
}
