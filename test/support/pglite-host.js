'use strict';
// Hosts the embedded database for a test in its own process: PGlite cannot be loaded inside
// Jest's module sandbox (it imports its WebAssembly dynamically). Prints "origin <how the
// database came to be>" and "ready <socketDir>", stops on SIGTERM or when stdin closes (the test
// process died). A third argument: the directory the PGlite snapshot is looked for in.
const { EmbeddedPostgres } = require('../../dist/src/database/embedded-postgres');

(async () => {
  const snapshotDir = process.argv[3];
  const embedded = await EmbeddedPostgres.start(
    process.argv[2],
    snapshotDir ? { snapshotDir } : {},
  );
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await embedded.stop();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.stdin.on('end', stop);
  process.stdin.resume();
  process.stdout.write(`origin ${embedded.origin}\nready ${embedded.socketDir}\n`);
})().catch((e) => {
  process.stderr.write(`${e.stack}\n`);
  process.exit(1);
});
