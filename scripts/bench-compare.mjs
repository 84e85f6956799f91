// `node scripts/bench-compare.mjs <other checkout> [--size=BYTES] [--conc=N] [--seconds=S]
// [--rounds=N]`: S3 GetObject through /s3 (header-signed SigV4 + session token, embedded
// database, fs blobs) on this checkout's build and on another one's (e.g. a worktree of an
// earlier commit, built with `npm ci && npm run build`), with scripts/bench-bare.mjs as the
// ceiling, interleaved round by round (this, other, bare, this, …) so that a noisy machine
// shifts all three alike. The load generator (scripts/bench-s3-load.mjs, Node) is pinned to
// core 1 with taskset when there is one. Prints one JSON line: requests/s per round, the
// medians and the ratios.
//
// The bare ceiling here is what this Node load generator can drive, far below what wrk drives
// against the same bare server: read the ratio of the two builds, not the ratio to bare.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  args,
  HOST,
  median,
  numberArg,
  onStopSignal,
  pipelineCredentials,
  readyUrl,
  root,
  serverEnv,
  stopProcess,
} from './lib/bench-common.mjs';

const other = args.find((a) => !a.startsWith('--'));
if (!other) {
  process.stderr.write('usage: node scripts/bench-compare.mjs <other checkout> [--size=…]\n');
  process.exit(2);
}
const SIZE = numberArg('size', 100 * 1024);
const CONC = numberArg('conc', 16);
const SECONDS = numberArg('seconds', 4);
const ROUNDS = numberArg('rounds', 3);

const dirs = [];
const procs = [];
const tempDir = (tag) => {
  const d = mkdtempSync(join(tmpdir(), `statehouse-compare-${tag}-`));
  dirs.push(d);
  return d;
};
async function cleanup() {
  await Promise.all(procs.map(stopProcess));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
}
onStopSignal(cleanup);

async function startStatehouse(checkout, tag) {
  const proc = spawn(process.execPath, [join(checkout, 'dist/src/cli/main.js'), 'serve'], {
    env: serverEnv({ STATEHOUSE_STS_TTL: '1h', STATEHOUSE_DATA_DIR: tempDir(tag) }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  procs.push(proc);
  const { url } = await readyUrl(proc);
  const { creds } = await pipelineCredentials(url);
  return { s3: `${url}/s3`, creds };
}

async function startBare() {
  const proc = spawn(process.execPath, [join(root, 'scripts/bench-bare.mjs'), tempDir('bare')], {
    env: { ...process.env, PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  procs.push(proc);
  const port = await new Promise((ok, fail) => {
    let out = '';
    proc.stdout.on('data', (d) => {
      out += d;
      const m = /"port":(\d+)/.exec(out);
      if (m) ok(m[1]);
    });
    proc.once('exit', (code) => fail(new Error(`bench-bare exited (${code})`)));
  });
  const creds = { accessKeyId: 'AKIABARE', secretAccessKey: 'bare', sessionToken: 'bare' };
  return { s3: `http://${HOST}:${port}/s3`, creds };
}

const pinned = (() => {
  try {
    execFileSync('taskset', ['-c', '1', 'true']);
    return true;
  } catch {
    return false;
  }
})();

function load({ s3, creds }) {
  const argv = [join(root, 'scripts/bench-s3-load.mjs'), 'get', s3, CONC, SECONDS, SIZE].map(
    String,
  );
  const out = execFileSync(
    pinned ? 'taskset' : process.execPath,
    pinned ? ['-c', '1', process.execPath, ...argv] : argv,
    {
      env: {
        ...process.env,
        BENCH_S3_ACCESS_KEY_ID: creds.accessKeyId,
        BENCH_S3_SECRET_ACCESS_KEY: creds.secretAccessKey,
        BENCH_S3_SESSION_TOKEN: creds.sessionToken,
      },
    },
  );
  const r = JSON.parse(out.toString());
  if (r.other > 0 || r.errors.length > 0) throw new Error(`failed requests: ${out}`);
  return r.perSecond;
}

try {
  const servers = {
    this: await startStatehouse(root, 'this'),
    other: await startStatehouse(resolve(other), 'other'),
    bare: await startBare(),
  };
  const perSecond = { this: [], other: [], bare: [] };
  for (let i = 0; i < ROUNDS; i++) {
    for (const k of Object.keys(servers)) perSecond[k].push(load(servers[k]));
  }
  const m = Object.fromEntries(Object.entries(perSecond).map(([k, v]) => [k, median(v)]));
  const ratio = (a, b) => Number((a / b).toFixed(3));
  console.log(
    JSON.stringify({
      size: SIZE,
      concurrency: CONC,
      seconds: SECONDS,
      rounds: ROUNDS,
      pinned,
      perSecond,
      median: m,
      thisOverOther: ratio(m.this, m.other),
      thisOverBare: ratio(m.this, m.bare),
      otherOverBare: ratio(m.other, m.bare),
    }),
  );
} finally {
  await cleanup();
}
