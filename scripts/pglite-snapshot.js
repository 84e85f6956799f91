#!/usr/bin/env node
'use strict';
// The build's last step (`npm run build`; scripts/build-if-stale.js when it is missing): writes
// dist/pglite/pglite-<version>.tar.gz, a freshly initialised empty PGlite cluster that a new
// embedded data dir is loaded from instead of running initdb (src/database/pglite-snapshot.ts).
// Needs the compiled dist/src. Does nothing when that snapshot is there already.
const { existsSync } = require('node:fs');
const { join } = require('node:path');

const compiled = join(__dirname, '..', 'dist', 'src', 'database', 'pglite-snapshot.js');
const { snapshotFile, writeSnapshot } = require(compiled);

if (!existsSync(snapshotFile())) {
  process.stderr.write('statehouse: writing the PGlite snapshot (initdb)…\n');
  writeSnapshot().catch((e) => {
    process.stderr.write(`statehouse: writing the PGlite snapshot failed: ${e.stack}\n`);
    process.exit(1);
  });
}
