// A reference for `npm run bench`: lock rows in bare SQL on PostgreSQL (DATABASE_URL), the floor
// of what a lock authority on that database costs. Each of <concurrency> clients owns one row key
// and repeats acquire (`INSERT … ON CONFLICT DO NOTHING RETURNING`) + release (`DELETE … WHERE`
// holder matches), one autocommit statement each, through <replicas> connection pools (as many
// server replicas would). Prints one JSON line (scripts/lib/bench-common.mjs runWorkers).
//
//   node scripts/bench-ref-sql.mjs <concurrency> <seconds> [replicas=2]
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { runWorkers } from './lib/bench-common.mjs';

const require = createRequire(import.meta.url);
const { Pool } = require('pg');

const [concurrency, seconds, replicas = 2] = process.argv.slice(2).map(Number);
if (!process.env.DATABASE_URL || !(concurrency > 0) || !(seconds > 0)) {
  process.stderr.write(
    'usage: DATABASE_URL=… node scripts/bench-ref-sql.mjs <concurrency> <seconds> [replicas]\n',
  );
  process.exit(2);
}
const pools = Array.from(
  { length: replicas },
  () =>
    new Pool({
      connectionString: process.env.DATABASE_URL,
      max: Math.ceil(concurrency / replicas),
    }),
);
await pools[0].query(`CREATE TABLE IF NOT EXISTS bench_ref_locks (
  state_id text PRIMARY KEY, lock_id text NOT NULL, info text NOT NULL, principal text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now())`);
await pools[0].query('DELETE FROM bench_ref_locks');

const info = JSON.stringify({ Operation: 'OperationTypeApply', Who: 'bench', Version: '1.11.4' });
const result = await runWorkers({
  concurrency,
  seconds,
  work: async (w) => {
    const pool = pools[w % replicas];
    const id = randomUUID();
    const won = await pool.query(
      `INSERT INTO bench_ref_locks (state_id, lock_id, info, principal) VALUES ($1, $2, $3, $4)
       ON CONFLICT (state_id) DO NOTHING RETURNING created_at`,
      [`s${w}`, id, info, 'svc:bench'],
    );
    if (won.rowCount !== 1) return { ok: false, status: 'not-won', bytes: 0 };
    const gone = await pool.query(
      'DELETE FROM bench_ref_locks WHERE state_id = $1 AND lock_id = $2 AND principal = $3',
      [`s${w}`, id, 'svc:bench'],
    );
    return {
      ok: gone.rowCount === 1,
      status: gone.rowCount === 1 ? 200 : 'not-released',
      bytes: 0,
    };
  },
});
await Promise.all(pools.map((p) => p.end()));
process.stdout.write(
  `${JSON.stringify({ scenario: 'sql-lock', concurrency, replicas, ...result })}\n`,
);
