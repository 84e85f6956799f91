#!/usr/bin/env node
'use strict';
// `npm start`: compiles when needed, then runs the CLI (`serve` by default from package.json).
const { spawn } = require('node:child_process');
const { buildIfStale, entry } = require('./build-if-stale');

buildIfStale();
const child = spawn(process.execPath, [entry, ...process.argv.slice(2)], { stdio: 'inherit' });
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig));
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
