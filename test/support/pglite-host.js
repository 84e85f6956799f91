'use strict';
// Hosts the embedded database for a test in its own process: PGlite cannot be loaded inside
// Jest's module sandbox (it imports its WebAssembly dynamically). Prints "ready <socketDir>",
// stops on SIGTERM or when stdin closes (the test process died).
const { EmbeddedPostgres } = require('../../dist/src/database/embedded-postgres');

(async () => {
  const embedded = await EmbeddedPostgres.start(process.argv[2]);
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
  process.stdout.write(`ready ${embedded.socketDir}\n`);
})().catch((e) => {
  process.stderr.write(`${e.stack}\n`);
  process.exit(1);
});
