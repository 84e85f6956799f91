'use strict';
// Compiles src/ and migrations/ into dist/ when dist is missing or older than the sources, and
// writes dist/pglite's snapshot of an empty cluster when the one for the installed PGlite is not
// there (scripts/pglite-snapshot.js; a new embedded data dir is loaded from it).
// `node scripts/build-if-stale.js --clean` (npm's prepack): a clean build, so that nothing
// compiled from a source that is gone ships in the package.
const { execFileSync } = require('node:child_process');
const {
  existsSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} = require('node:fs');
const { join } = require('node:path');

const root = join(__dirname, '..');
const entry = join(root, 'dist', 'src', 'cli', 'main.js');
const stamp = join(root, 'dist', '.build-stamp');

function newestMtime(dir) {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    newest = Math.max(newest, e.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }
  return newest;
}

function buildIfStale({ clean = false } = {}) {
  if (clean) rmSync(join(root, 'dist'), { recursive: true, force: true });
  const sources = Math.max(
    newestMtime(join(root, 'src')),
    newestMtime(join(root, 'migrations')),
    statSync(join(root, 'tsconfig.json')).mtimeMs,
    statSync(join(root, 'tsconfig.build.json')).mtimeMs,
  );
  if (existsSync(entry) && existsSync(stamp) && statSync(stamp).mtimeMs >= sources) {
    ensureSnapshot();
    return false;
  }
  process.stderr.write('statehouse: compiling (tsc -p tsconfig.build.json)…\n');
  execFileSync(
    process.execPath,
    [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'],
    { cwd: root, stdio: 'inherit' },
  );
  writeFileSync(stamp, `${new Date().toISOString()}\n`);
  ensureSnapshot();
  return true;
}

/** The name src/database/pglite-snapshot.ts (snapshotFile) gives the installed PGlite's one. */
function snapshotPath() {
  // <package>/dist/index.cjs; its package.json is not among the package's exports
  const pkg = join(require.resolve('@electric-sql/pglite'), '..', '..', 'package.json');
  const { version } = JSON.parse(readFileSync(pkg, 'utf8'));
  return join(root, 'dist', 'pglite', `pglite-${version}.tar.gz`);
}

/** Writes the snapshot, in a process of its own (initdb's memory), when it is missing. */
function ensureSnapshot() {
  if (existsSync(snapshotPath())) return;
  execFileSync(process.execPath, [join(__dirname, 'pglite-snapshot.js')], {
    cwd: root,
    stdio: 'inherit',
  });
}

module.exports = { buildIfStale, entry, root };

if (require.main === module) buildIfStale({ clean: process.argv.includes('--clean') });
