'use strict';
// Compiles src/ and migrations/ into dist/ when dist is missing or older than the sources.
// `node scripts/build-if-stale.js --clean` (npm's prepack): a clean build, so that nothing
// compiled from a source that is gone ships in the package.
const { execFileSync } = require('node:child_process');
const { existsSync, readdirSync, rmSync, statSync, writeFileSync } = require('node:fs');
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
  if (existsSync(entry) && existsSync(stamp) && statSync(stamp).mtimeMs >= sources) return false;
  process.stderr.write('statehouse: compiling (tsc -p tsconfig.build.json)…\n');
  execFileSync(
    process.execPath,
    [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'],
    { cwd: root, stdio: 'inherit' },
  );
  writeFileSync(stamp, `${new Date().toISOString()}\n`);
  return true;
}

module.exports = { buildIfStale, entry, root };

if (require.main === module) buildIfStale({ clean: process.argv.includes('--clean') });
