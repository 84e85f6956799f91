'use strict';
// Preloaded with `NODE_OPTIONS=--require <this file>` by test/e2e/creds-cache.spec.ts: when the
// process exits, writes the path of every CommonJS module it loaded, one per line, to the file
// named by RECORD_MODULES_TO. Nothing is written without that variable.
const { writeFileSync } = require('node:fs');

const to = process.env.RECORD_MODULES_TO;
if (to) process.on('exit', () => writeFileSync(to, Object.keys(require.cache).join('\n')));
