// `node scripts/bench-creds.mjs [--runs=N]`: what `credential_process = statehouse creds --json`
// costs an AWS tool per call (issue 12: at most 80 ms over static credentials with a warm cache).
// Times, as the median of N runs (default 15), the wall clock of
//   - `node -e 0` (Node's own start: the floor),
//   - `node dist/src/cli/main.js creds --json --server URL` with a warm cache (the fast path),
//   - the same with the cache removed before each run (the full CLI and one issue),
// against a real server started here on 127.0.0.1 (an API token of svc:bench in
// STATEHOUSE_TOKEN, a temporary config directory). The server is stopped and every temporary
// directory removed at the end, on failure and on Ctrl-C.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  baseEnv,
  buildIfStale,
  captureOutput,
  CLI,
  median,
  numberArg,
  onStopSignal,
  readyFromLog,
  serverEnv,
  stopProcess,
  TOKEN,
} from './lib/bench-common.mjs';

const RUNS = numberArg('runs', 15);
const NODE = process.execPath;

buildIfStale();
const dir = mkdtempSync(join(tmpdir(), 'statehouse-bench-creds-'));
let server;
const cleanup = async () => {
  if (server) await stopProcess(server);
  rmSync(dir, { recursive: true, force: true });
};
onStopSignal(cleanup);

/** Wall time of one process in ms; fails on a non-zero exit. */
function timed(argv, env) {
  const t0 = performance.now();
  const r = spawnSync(NODE, argv, { env, encoding: 'utf8' });
  const ms = performance.now() - t0;
  if (r.status !== 0) throw new Error(`${argv.join(' ')} exited ${r.status}: ${r.stderr}`);
  return ms;
}

try {
  server = spawn(NODE, [CLI, 'serve'], {
    env: serverEnv({ STATEHOUSE_LOG_LEVEL: 'info', STATEHOUSE_DATA_DIR: join(dir, 'data') }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const { url } = await readyFromLog(server, captureOutput(server, 64 * 1024));
  const res = await fetch(`${url}/v1/auth/tokens`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'bench-creds', subject: 'svc:bench' }),
  });
  if (res.status !== 201) throw new Error(`creating an API token answered ${res.status}`);
  const { token } = await res.json();

  const env = {
    ...baseEnv(),
    HOME: join(dir, 'home'),
    XDG_CONFIG_HOME: join(dir, 'xdg'),
    STATEHOUSE_TOKEN: token,
  };
  const cache = join(dir, 'xdg', 'statehouse', 's3-credentials-cache.json');
  const creds = [CLI, 'creds', '--json', '--server', url];
  const floor = [];
  const cold = [];
  const warm = [];
  timed(['-e', '0'], env); // the first start pays for the disk cache: not counted
  timed(creds, env);
  for (let i = 0; i < RUNS; i++) {
    floor.push(timed(['-e', '0'], env));
    rmSync(cache, { force: true });
    cold.push(timed(creds, env));
    if (!existsSync(cache)) throw new Error('creds --json wrote no cache file');
    warm.push(timed(creds, env));
  }
  const f = median(floor);
  const row = (name, xs) =>
    `${name.padEnd(34)}${median(xs).toFixed(1).padStart(8)} ms   ${(median(xs) / f).toFixed(2)}× node -e 0   +${(median(xs) - f).toFixed(1)} ms`;
  console.log(`statehouse creds --json, median of ${RUNS} runs (Node ${process.version})`);
  console.log(`${'node -e 0'.padEnd(34)}${f.toFixed(1).padStart(8)} ms`);
  console.log(row('creds --json, warm cache', warm));
  console.log(row('creds --json, cold (full CLI)', cold));
} finally {
  await cleanup();
}
