'use strict';
// Serves an in-memory PGlite through `PgliteBridge` on the socket path argv[2], for
// test/db/pglite-bridge.spec.ts (PGlite cannot load inside Jest's module sandbox). Prints
// "ready"; answers the lines "calls" (calls into PGlite since the last "calls") and "intx"
// (whether the session is inside a transaction) and "changes" (the bridge's count of batches
// that may change data of the watched table `t`) on stdin; stops when stdin closes.
const { PGlite } = require('@electric-sql/pglite');
const { PgliteBridge } = require('../../dist/src/database/pglite-bridge');
const { WatchedTables } = require('../../dist/src/database/statement-changes');

(async () => {
  const db = await PGlite.create();
  let calls = 0;
  const original = db.execProtocolRawStream.bind(db);
  db.execProtocolRawStream = (message, options) => {
    calls++;
    return original(message, options);
  };
  const watched = new WatchedTables();
  watched.add(['t']);
  const bridge = new PgliteBridge(db, process.argv[2], watched);
  await bridge.start();
  let input = '';
  process.stdin.on('data', (d) => {
    input += d;
    let nl;
    while ((nl = input.indexOf('\n')) >= 0) {
      const line = input.slice(0, nl);
      input = input.slice(nl + 1);
      if (line === 'calls') {
        process.stdout.write(`calls ${calls}\n`);
        calls = 0;
      } else if (line === 'changes') {
        process.stdout.write(`changes ${bridge.changes}\n`);
      } else if (line === 'intx') {
        process.stdout.write(`intx ${db.isInTransaction()}\n`);
      }
    }
  });
  process.stdin.on('end', async () => {
    await bridge.stop();
    await db.close();
    process.exit(0);
  });
  process.stdout.write('ready\n');
})().catch((e) => {
  process.stderr.write(`${e.stack}\n`);
  process.exit(1);
});
