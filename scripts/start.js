#!/usr/bin/env node
// `npm start`: builds when the compiled output is missing or older than the sources, then runs
// the CLI with the given arguments (`serve` by default from package.json).
'use strict';
const { execFileSync, spawn } = require('node:child_process');
const { existsSync, readdirSync, statSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');

const root = join(__dirname, '..');
const entry = join(root, 'dist', 'src', 'cli', 'main.js');
const stamp = join(root, 'dist', '.build-stamp');

function newestMtime(dir) {
  let newest = 0;
  for (const name of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, name.name);
    newest = Math.max(newest, name.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }
  return newest;
}

const sources = Math.max(newestMtime(join(root, 'src')), newestMtime(join(root, 'migrations')));
if (!existsSync(entry) || !existsSync(stamp) || statSync(stamp).mtimeMs < sources) {
  process.stderr.write('statehouse: building (npm run build)…\n');
  execFileSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'], {
    cwd: root,
    stdio: 'inherit',
  });
  writeFileSync(stamp, `${new Date().toISOString()}\n`);
}
const child = spawn(process.execPath, [entry, ...process.argv.slice(2)], { stdio: 'inherit' });
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig));
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
