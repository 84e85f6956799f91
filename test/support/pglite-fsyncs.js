'use strict';
// Counts the fsyncs the embedded database makes (in its own process: PGlite cannot be loaded
// inside Jest's module sandbox). Opens PGlite as the server does, on the data dir argv[2],
// commits five inserts and runs one read, and prints as JSON how many fsyncs PostgreSQL asked
// for and how many fsync(2) calls Node made, during the inserts and during the read.
const fs = require('node:fs');
const { PGlite } = require('@electric-sql/pglite');
const { EMBEDDED_START_PARAMS } = require('../../dist/src/database/embedded-postgres');
const { DurableNodeFS, durableFsyncs } = require('../../dist/src/database/pglite-durable-fs');

let real = 0;
const fsyncSync = fs.fsyncSync;
fs.fsyncSync = (fd) => {
  real++;
  return fsyncSync(fd);
};

(async () => {
  const db = await PGlite.create({
    fs: new DurableNodeFS(process.argv[2]),
    startParams: EMBEDDED_START_PARAMS,
  });
  await db.exec('CREATE TABLE t (id int PRIMARY KEY)');
  const at = () => ({ asked: durableFsyncs.count, real });
  const before = at();
  for (let i = 0; i < 5; i++) await db.query('INSERT INTO t VALUES ($1)', [i]);
  const afterWrites = at();
  await db.query('SELECT count(*) FROM t');
  const afterRead = at();
  await db.close();
  const diff = (a, b) => ({ asked: b.asked - a.asked, real: b.real - a.real });
  process.stdout.write(
    JSON.stringify({ writes: diff(before, afterWrites), read: diff(afterWrites, afterRead) }),
  );
})().catch((e) => {
  process.stderr.write(`${e.stack}\n`);
  process.exit(1);
});
