// `npm run bench`: the performance figures of issue 12, each as ours / reference / ratio, measured
// in the same run. A figure is the median of ROUNDS runs, interleaved round by round (ours,
// reference, ours, …) so that a noisy, shared machine shifts all alike; the spread (min–max) is
// printed with it. The load generator runs in its own process pinned to core 1 and the servers
// to core 0 (`taskset`, when there is more than one core). Everything listens on 127.0.0.1.
//
//  get     S3 GetObject of a presigned URL (full SigV4 + session token) and HTTP-backend GET of
//          100 KiB and 1 MiB states (embedded database, fs blobs), with wrk — against bare Node
//          answering the same bytes from memory (scripts/bench-bare.mjs --memory), the minimal
//          NestJS app doing the same work (scripts/bench-ref-nest.mjs) and s3rver
//          (scripts/bench-ref-s3rver.mjs);
//  get-pg  the same presigned S3 GetObject of 100 KiB and 1 MiB states on PostgreSQL, the load
//          split evenly over two replicas (two wrk processes, one per replica, 8 connections
//          each, summed; after an untimed 1 s warm-up of each target), against two bare Node
//          servers (the same split): replicas (a) with the fs blob store (one shared directory;
//          with the default blob cache and without it) and (b) with the postgres blob store,
//          cold (STATEHOUSE_BLOB_CACHE_MIB=0: every read goes to PostgreSQL) and warm (the
//          default blob cache, the same version read again); MB/s per replica (a throwaway
//          cluster via scripts/with-postgres.sh unless DATABASE_URL is set);
//  put     S3 PutObject of a 1 MiB state (Node load generator: each request signed) against a bare
//          Node server that receives the body, fsyncs it to a file and answers; then the server's
//          memory growth over a 50 MiB PutObject (it must stay streamed);
//  locks   LOCK+UNLOCK round trips, 32 clients each on its own state, two replicas on PostgreSQL,
//          against bare SQL lock rows (scripts/bench-ref-sql.mjs); then 32 clients fighting over
//          4 states, which must never see two holders (a throwaway cluster via
//          scripts/with-postgres.sh unless DATABASE_URL is set);
//  plan    `terraform plan` of 200 resources: `backend "s3"` with static credentials and with the
//          README's credential_process, against the `local` backend, and the same backend
//          against an in-memory S3 stub that checks nothing (scripts/bench-ref-s3stub.mjs);
//  readyz  time to the first healthy /readyz on the embedded default, new and existing data dir.
//
// Options: --only=get,put,… (default: all), --quick (3 rounds of shorter runs), --rounds=N,
// --seconds=S (per load run).
import { execFile, execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import {
  buildIfStale,
  captureOutput,
  CLI,
  exchange,
  HOST,
  MiB,
  median,
  numberArg,
  onStopSignal,
  pipelineCredentials,
  procStatusMiB,
  quick,
  readyUrl,
  root,
  serverEnv,
  stateTemplate,
  stopProcess,
} from './lib/bench-common.mjs';
import { sha256Hex, sigv4Signer } from './lib/bench-sigv4.mjs';

buildIfStale();
const ROUNDS = numberArg('rounds', quick ? 3 : 5);
const SECONDS = numberArg('seconds', quick ? 2 : 4);
const onlyArg = process.argv.find((a) => a.startsWith('--only='))?.slice(7);
const sections = onlyArg ? onlyArg.split(',') : ['get', 'get-pg', 'put', 'locks', 'plan', 'readyz'];
const NODE = process.execPath;

// ------------------------------------------------------------------ processes and pinning

const pinned = cpus().length > 1 && spawnSync('taskset', ['-c', '0', 'true']).status === 0;
/** argv for a command on core `core` (no pinning on one core or without taskset). */
const onCore = (core, cmd, argv) =>
  pinned ? ['taskset', ['-c', String(core), cmd, ...argv]] : [cmd, argv];

const procs = new Set();
const dirs = new Set();
const tempDir = (tag) => {
  const d = mkdtempSync(join(tmpdir(), `statehouse-bench-${tag}-`));
  dirs.add(d);
  return d;
};
async function cleanup() {
  await Promise.all([...procs].map(stopProcess));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
}
onStopSignal(cleanup);

/** A Node server process, on core 0 unless `pin` is false (a start-up uses every core it has). */
function spawnServer(argv, env, pin = true) {
  const [cmd, args] = pin ? onCore(0, NODE, argv) : [NODE, argv];
  const proc = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  procs.add(proc);
  proc.once('exit', () => procs.delete(proc));
  return proc;
}

/** A reference server script that prints `{"port":N}` once it listens. */
async function startReference(script, args, env = {}) {
  const proc = spawnServer([join(root, 'scripts', script), ...args], {
    ...process.env,
    PORT: '0',
    ...env,
  });
  const log = captureOutput(proc, 16 * 1024);
  let poll;
  let giveUp;
  const port = await new Promise((ok, fail) => {
    poll = setInterval(() => {
      const m = /"port":(\d+)/.exec(log());
      if (m) ok(Number(m[1]));
    }, 20);
    proc.once('exit', (code) => fail(new Error(`${script} exited (${code}): ${log()}`)));
    giveUp = setTimeout(() => fail(new Error(`${script} did not listen: ${log()}`)), 60_000);
  }).finally(() => {
    clearInterval(poll);
    clearTimeout(giveUp);
  });
  return { origin: `http://${HOST}:${port}`, proc, stop: () => stopProcess(proc) };
}

/** `statehouse serve` (fs blobs under a fresh data dir) with a pipeline token and S3 credentials. */
async function startStatehouse(extraEnv = {}) {
  const proc = spawnServer(
    [CLI, 'serve'],
    serverEnv({ STATEHOUSE_STS_TTL: '1h', STATEHOUSE_DATA_DIR: tempDir('data'), ...extraEnv }),
  );
  const { url, log } = await readyUrl(proc);
  return { url, proc, log, stop: () => stopProcess(proc), ...(await pipelineCredentials(url)) };
}

// ------------------------------------------------------------------ load and figures

const which = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;

/** argv of one wrk run of `seconds` against `url`. */
const wrkArgv = (url, conc, headers, seconds = SECONDS) =>
  onCore(1, 'wrk', [
    '-t1',
    '--timeout',
    '30s',
    `-c${conc}`,
    `-d${seconds}s`,
    '--latency',
    ...Object.entries(headers).flatMap(([k, v]) => ['-H', `${k}: ${v}`]),
    url,
  ]);

/** requests/s and latency of a wrk report; any non-2xx answer or socket error fails it. */
function wrkResult(url, out) {
  const bad =
    /Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? /Socket errors: (.*)/.exec(out)?.[1];
  if (bad) throw new Error(`wrk ${url.split('?')[0]}: failed requests (${bad})\n${out}`);
  const ms = (p) => {
    const m = new RegExp(`\\s${p}%\\s+([\\d.]+)(us|ms|s)`).exec(out);
    return m ? Number(m[1]) * { us: 0.001, ms: 1, s: 1000 }[m[2]] : NaN;
  };
  return { perSecond: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)[1]), p50: ms(50), p99: ms(99) };
}

/** One wrk run: requests/s and latency; any non-2xx answer or socket error fails it. */
function wrk(url, { conc = 16, headers = {} } = {}) {
  const [cmd, args] = wrkArgv(url, conc, headers);
  return wrkResult(url, execFileSync(cmd, args, { encoding: 'utf8' }));
}

/**
 * The load split evenly over several servers: one wrk process per URL (each on core 1, `conc`
 * connections), all at once; requests/s summed, the worst p99, and each server's own requests/s.
 */
async function wrkSplit(urls, { conc = 8, headers = {}, seconds = SECONDS } = {}) {
  const runs = await Promise.all(
    urls.map(async (url) => {
      const [cmd, args] = wrkArgv(url, conc, headers, seconds);
      const { stdout } = await promisify(execFile)(cmd, args, { encoding: 'utf8' });
      return wrkResult(url, stdout);
    }),
  );
  return {
    perSecond: runs.reduce((sum, r) => sum + r.perSecond, 0),
    p99: Math.max(...runs.map((r) => r.p99)),
    each: runs.map((r) => r.perSecond),
  };
}

/** A load script of this directory in its own process (pinned); its last JSON line. */
function nodeLoad(script, args, env = {}) {
  const [cmd, argv] = onCore(1, NODE, [join(root, 'scripts', script), ...args.map(String)]);
  const out = execFileSync(cmd, argv, {
    encoding: 'utf8',
    env: { ...process.env, ...env },
    maxBuffer: 1 << 20,
  });
  return JSON.parse(out.trim().split('\n').pop());
}

/**
 * Runs `targets` (name → () => { perSecond, … }, or a promise of it) ROUNDS times, interleaved, and answers each
 * one's runs. A target that throws fails the section.
 */
async function interleaved(targets, rounds = ROUNDS) {
  const runs = Object.fromEntries(Object.keys(targets).map((k) => [k, []]));
  for (let i = 0; i < rounds; i++)
    for (const [k, run] of Object.entries(targets)) runs[k].push(await run());
  return runs;
}

const fmt = (n, d = 0) => (Number.isFinite(n) ? n.toFixed(d) : 'n/a');
/** "median (min–max)" of one field of a target's runs. */
function spread(runs, field = 'perSecond', d = 0) {
  const xs = runs.map((r) => r[field]);
  return `${fmt(median(xs), d)} (${fmt(Math.min(...xs), d)}–${fmt(Math.max(...xs), d)})`;
}
const ratio = (a, b, field = 'perSecond') =>
  median(a.map((r) => r[field])) / median(b.map((r) => r[field]));

const report = [];
const line = (s = '') => {
  report.push(s);
  console.log(s);
};
const verdict = (value, goal, higherIsBetter = true) =>
  `${fmt(value, 3)}× (goal ${higherIsBetter ? '≥' : '≤'} ${goal}×: ${(higherIsBetter ? value >= goal : value <= goal) ? 'met' : 'NOT met'})`;

// ------------------------------------------------------------------ get

/** PUT over node:http (fetch's undici is not what Terraform sends, and trips on early answers). */
async function putState(origin, path, signer, body) {
  const url = new URL(origin);
  const headers = signer ? signer.headers('PUT', url.host, path, sha256Hex(body)) : {};
  const agent = new http.Agent();
  const r = await exchange(
    agent,
    url,
    'PUT',
    path,
    {
      ...headers,
      'content-type': 'application/json',
      'content-length': String(body.length),
    },
    body,
  );
  agent.destroy();
  if (r.status !== 200) throw new Error(`PUT ${origin}${path} answered ${r.status}: ${r.body}`);
}

async function expectBody(url, headers, size) {
  const r = await fetch(url, { headers });
  const got = (await r.arrayBuffer()).byteLength;
  if (r.status !== 200 || got !== size)
    throw new Error(`GET ${url.split('?')[0]} answered ${r.status} with ${got} bytes, not ${size}`);
}

async function sectionGet() {
  line(
    '\n## S3 GetObject (presigned: full SigV4 + session token) and HTTP-backend GET — embedded database, fs blobs',
  );
  if (!which('wrk')) {
    line('**wrk is not installed (`apt-get install wrk`): this section is SKIPPED.**');
    return;
  }
  const sh = await startStatehouse();
  const bare = await startReference('bench-bare.mjs', [tempDir('bare'), '--memory']);
  const nest = await startReference('bench-ref-nest.mjs', [tempDir('nest')]);
  const s3rver = await startReference('bench-ref-s3rver.mjs', [tempDir('s3rver')]);
  const s3rverSigner = sigv4Signer({ accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' });
  const nestSigner = sigv4Signer({
    accessKeyId: 'AKIAREFERENCE',
    secretAccessKey: 'reference-secret',
  });
  const ourSigner = sigv4Signer(sh.creds);
  try {
    line('| state | target | req/s, median (min–max) | p99 ms | ratio to bare Node |');
    line('|---|---|---|---|---|');
    for (const size of [100 * 1024, 1 * MiB]) {
      const template = stateTemplate(size);
      template.setSerial(1);
      const body = template.buf;
      const unit = `bench/get-${size}`;
      const key = `/tfstate/${unit}/terraform.tfstate`;
      await putState(sh.url, `/s3${key}`, ourSigner, body);
      await putState(bare.origin, key, undefined, body);
      await putState(nest.origin, `/s3${key}`, undefined, body);
      await putState(s3rver.origin, key, s3rverSigner, body);
      const bearer = { Authorization: `Bearer ${sh.token}` };
      const urls = {
        'Statehouse S3': [ourSigner.presign('GET', sh.url, `/s3${key}`), {}],
        'Statehouse HTTP backend': [`${sh.url}/v1/backend/${unit}`, bearer],
        'bare Node (memory)': [`${bare.origin}${key}`, {}],
        'minimal NestJS app': [nestSigner.presign('GET', nest.origin, `/s3${key}`), {}],
        s3rver: [s3rverSigner.presign('GET', s3rver.origin, key), {}],
      };
      for (const [url, headers] of Object.values(urls)) await expectBody(url, headers, body.length);
      const runs = await interleaved(
        Object.fromEntries(
          Object.entries(urls).map(([k, [url, headers]]) => [k, () => wrk(url, { headers })]),
        ),
      );
      const b = runs['bare Node (memory)'];
      for (const [k, r] of Object.entries(runs)) {
        line(
          `| ${size / 1024} KiB | ${k} | ${spread(r)} | ${spread(r, 'p99', 1)} | ${fmt(ratio(r, b), 3)} |`,
        );
      }
      const goal = size === MiB ? 0.35 : 0.1;
      line(
        `| ${size / 1024} KiB | **goals** | S3 / bare ${verdict(ratio(runs['Statehouse S3'], b), goal)}; S3 / s3rver ${verdict(ratio(runs['Statehouse S3'], runs.s3rver), 1.5)}; HTTP / S3 ${verdict(ratio(runs['Statehouse HTTP backend'], runs['Statehouse S3']), 1)} | | |`,
      );
    }
  } finally {
    await Promise.all([sh, bare, nest, s3rver].map((s) => s.stop()));
  }
}

// ------------------------------------------------------------------ get-pg

/** MB (10^6 bytes) per second per replica of `perSecond` GETs of `size` bytes over two. */
const mbPerReplica = (perSecond, size) => (perSecond * size) / 2 / 1e6;

async function sectionGetPg() {
  if (underPostgres('get-pg')) return;
  line(
    '\n## S3 GetObject (presigned: full SigV4 + session token) on PostgreSQL, load split evenly over two replicas',
  );
  if (!which('wrk')) {
    line('**wrk is not installed (`apt-get install wrk`): this section is SKIPPED.**');
    return;
  }
  const db = { DATABASE_URL: process.env.DATABASE_URL, STATEHOUSE_DATABASE_POOL_SIZE: '16' };
  const blobs = tempDir('blobs');
  const configs = {
    // The default settings: the blob cache (64 MiB) serves a version read again from memory.
    'fs blobs (shared dir, default blob cache)': {
      STATEHOUSE_STORAGE: 'fs',
      STATEHOUSE_STORAGE_FS_DIR: blobs,
    },
    'fs blobs (shared dir), no blob cache': {
      STATEHOUSE_STORAGE: 'fs',
      STATEHOUSE_STORAGE_FS_DIR: blobs,
      STATEHOUSE_BLOB_CACHE_MIB: '0',
    },
    'postgres blobs, cold (no blob cache)': {
      STATEHOUSE_STORAGE: 'postgres',
      STATEHOUSE_BLOB_CACHE_MIB: '0',
    },
    'postgres blobs, warm (blob cache, default 64 MiB)': { STATEHOUSE_STORAGE: 'postgres' },
  };
  const pairs = {};
  const started = [];
  try {
    // One after the other: the first replica migrates, every later one finds the schema.
    for (const [name, env] of Object.entries(configs)) {
      pairs[name] = [];
      for (let i = 0; i < 2; i++) {
        const s = await startStatehouse({ ...db, ...env });
        started.push(s);
        pairs[name].push(s);
      }
    }
    const bare = [];
    for (let i = 0; i < 2; i++) {
      const b = await startReference('bench-bare.mjs', [tempDir('bare'), '--memory']);
      started.push(b);
      bare.push(b);
    }
    const BARE = 'two bare Node servers (memory)';
    line(
      '| state | target | req/s over both, median (min–max) | MB/s per replica | p99 ms | ratio to two bare Node |',
    );
    line('|---|---|---|---|---|---|');
    for (const size of [100 * 1024, 1 * MiB]) {
      const template = stateTemplate(size);
      template.setSerial(1);
      const body = template.buf;
      const key = (unit) => `/tfstate/${unit}/terraform.tfstate`;
      const targets = {};
      for (const [name, [a, b]] of Object.entries(pairs)) {
        // Written through one replica, read through both; the postgres pairs each have their own
        // state (they share the database), so a cold pair never reads what a warm one wrote.
        const path = key(`bench/get-pg-${name.replace(/\W+/g, '-')}-${size}`);
        const signer = sigv4Signer(a.creds);
        await putState(a.url, `/s3${path}`, signer, body);
        targets[`Statehouse S3, ${name}`] = [a, b].map((s) =>
          signer.presign('GET', s.url, `/s3${path}`),
        );
      }
      for (const b of bare) await putState(b.origin, key('bench/get-pg'), undefined, body);
      targets[BARE] = bare.map((b) => `${b.origin}${key('bench/get-pg')}`);
      for (const urls of Object.values(targets))
        for (const url of urls) await expectBody(url, {}, body.length);
      // Untimed: one short run each first, so that no target's first round pays for its warm-up
      // (compiling the hot path) while the others do not.
      for (const urls of Object.values(targets)) await wrkSplit(urls, { seconds: 1 });
      const runs = await interleaved(
        Object.fromEntries(Object.entries(targets).map(([k, urls]) => [k, () => wrkSplit(urls)])),
      );
      const b = runs[BARE];
      for (const [k, r] of Object.entries(runs)) {
        const mb = r.map((x) => ({ mb: mbPerReplica(x.perSecond, size) }));
        line(
          `| ${size / 1024} KiB | ${k} | ${spread(r)} | ${spread(mb, 'mb', 1)} | ${spread(r, 'p99', 1)} | ${fmt(ratio(r, b), 3)} |`,
        );
      }
      // Each replica's share, to show the split was even (median over the rounds).
      const shares = Object.entries(runs)
        .map(
          ([k, r]) =>
            `${k}: ${[0, 1].map((i) => fmt(median(r.map((x) => x.each[i])))).join(' / ')}`,
        )
        .join('; ');
      line(`| ${size / 1024} KiB | req/s per replica (median) | ${shares} | | | |`);
      const goal = size === MiB ? 0.35 : 0.1;
      const ratioOf = (name) => ratio(runs[`Statehouse S3, ${name}`], b);
      const [fsName, fsColdName, coldName, warmName] = Object.keys(configs);
      const coldMb = median(
        runs[`Statehouse S3, ${coldName}`].map((x) => mbPerReplica(x.perSecond, size)),
      );
      const warm = ratioOf(warmName);
      const pgGoal =
        size === MiB
          ? `; postgres blobs: cold ${fmt(coldMb, 1)} MB/s per replica (goal ≥ 150: ${coldMb >= 150 ? 'met' : 'NOT met'}) or warm / bare ${verdict(warm, goal)} — ${coldMb >= 150 || warm >= goal ? 'met' : 'NOT met'}`
          : `; postgres blobs warm / bare ${verdict(warm, goal)}, cold / bare ${fmt(ratioOf(coldName), 3)}×`;
      line(
        `| ${size / 1024} KiB | **goals** | fs blobs / bare ${verdict(ratioOf(fsName), goal)} (no blob cache: ${fmt(ratioOf(fsColdName), 3)}×)${pgGoal} | | | |`,
      );
    }
  } finally {
    await Promise.all(started.map((s) => s.stop()));
  }
}

// ------------------------------------------------------------------ put

async function sectionPut() {
  line(
    '\n## S3 PutObject — embedded database, fs blobs (Node load generator, 8 clients, each request signed)',
  );
  const sh = await startStatehouse();
  const bare = await startReference('bench-bare.mjs', [tempDir('bare'), '--fsync']);
  const env = (c) => ({
    BENCH_S3_ACCESS_KEY_ID: c.accessKeyId,
    BENCH_S3_SECRET_ACCESS_KEY: c.secretAccessKey,
    BENCH_S3_SESSION_TOKEN: c.sessionToken,
  });
  const put =
    (s3, creds, size, conc = 8) =>
    () => {
      const r = nodeLoad('bench-s3-load.mjs', ['put', s3, conc, SECONDS, size], env(creds));
      if (r.other > 0)
        throw new Error(
          `PutObject against ${s3}: ${r.other} failed requests: ${JSON.stringify(r.errors ?? r.statuses)}`,
        );
      return r;
    };
  try {
    const bareCreds = { accessKeyId: 'AKIABARE', secretAccessKey: 'bare', sessionToken: 'bare' };
    const runs = await interleaved({
      'Statehouse S3': put(`${sh.url}/s3`, sh.creds, MiB),
      'bare Node (fsync)': put(`${bare.origin}/s3`, bareCreds, MiB),
    });
    line('| state | target | req/s, median (min–max) | MB/s | p99 ms |');
    line('|---|---|---|---|---|');
    for (const [k, r] of Object.entries(runs))
      line(
        `| 1 MiB | ${k} | ${spread(r)} | ${spread(r, 'mbPerSecond', 1)} | ${spread(r, 'p99ms', 1)} |`,
      );
    line(
      `| 1 MiB | **goal** | ${verdict(ratio(runs['Statehouse S3'], runs['bare Node (fsync)']), 0.25)} | | |`,
    );
    const idle = procStatusMiB(sh.proc.pid, 'VmRSS');
    const big = put(`${sh.url}/s3`, sh.creds, 50 * MiB, 2)();
    const growth = procStatusMiB(sh.proc.pid, 'VmHWM') - idle;
    line(
      `| 50 MiB | Statehouse S3, 2 clients | ${big.perSecond} req/s, ${big.mbPerSecond} MB/s | peak RSS growth over idle: ${fmt(growth)} MiB (goal ≤ 64: ${growth <= 64 ? 'met' : 'NOT met'}) | |`,
    );
  } finally {
    await Promise.all([sh.stop(), bare.stop()]);
  }
}

// ------------------------------------------------------------------ locks

/**
 * Without DATABASE_URL: runs `section` of this script again under scripts/with-postgres.sh (a
 * throwaway cluster), reports its lines and answers true; with it, answers false.
 */
function underPostgres(section) {
  if (process.env.DATABASE_URL) return false;
  line(`\n## ${section} on PostgreSQL: starting a throwaway cluster (scripts/with-postgres.sh)`);
  const me = fileURLToPath(import.meta.url);
  const r = spawnSync(
    join(root, 'scripts/with-postgres.sh'),
    [NODE, me, `--only=${section}`, `--rounds=${ROUNDS}`, `--seconds=${SECONDS}`],
    {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  for (const l of (r.stdout ?? '').split('\n').filter((l) => /^(\||##|\*\*)/.test(l))) line(l);
  if (r.status !== 0) line(`**The PostgreSQL ${section} benchmark failed (exit ${r.status}).**`);
  return true;
}

async function sectionLocks() {
  if (underPostgres('locks')) return;
  line('\n## LOCK+UNLOCK round trips (HTTP backend), PostgreSQL, two replicas, 32 clients');
  const env = { DATABASE_URL: process.env.DATABASE_URL, STATEHOUSE_DATABASE_POOL_SIZE: '16' };
  // The first replica migrates; the second starts on the migrated schema.
  const a = await startStatehouse(env);
  const b = await startStatehouse(env);
  try {
    const both = `${a.url},${b.url}`;
    const lock = (scenario) => () =>
      nodeLoad('bench-load.mjs', [scenario, both, a.token, 32, SECONDS]);
    const runs = await interleaved({
      'Statehouse, 2 replicas': lock('lock'),
      'bare SQL lock rows, 2 pools': () => nodeLoad('bench-ref-sql.mjs', [32, SECONDS, 2]),
    });
    line('| target | round trips/s, median (min–max) | p50 ms | p99 ms |');
    line('|---|---|---|---|');
    for (const [k, r] of Object.entries(runs))
      line(`| ${k} | ${spread(r)} | ${spread(r, 'p50ms', 1)} | ${spread(r, 'p99ms', 1)} |`);
    line(
      `| **goal** | ${verdict(ratio(runs['Statehouse, 2 replicas'], runs['bare SQL lock rows, 2 pools']), 0.25)} | | |`,
    );
    const fight = lock('lock-fight')();
    const refusedOnly = Object.keys(fight.statuses).every((s) => s === '200' || s === '423');
    line(
      `| 32 clients over 4 states | ${fight.perSecond} won round trips/s; answers ${JSON.stringify(fight.statuses)} | two holders at once: ${fight.twoHolders} | ${fight.twoHolders === 0 && refusedOnly ? 'correct' : '**WRONG**'} |`,
    );
    if (fight.twoHolders !== 0 || !refusedOnly) process.exitCode = 1;
  } finally {
    await Promise.all([a.stop(), b.stop()]);
  }
}

// ------------------------------------------------------------------ plan

const RESOURCES = 200;
function mainTf(backendBlock) {
  const resources = Array.from(
    { length: RESOURCES },
    (_, i) =>
      `resource "terraform_data" "r${i}" {\n  input = "resource-${i}-${'x'.repeat(200)}"\n}\n`,
  );
  return `terraform {\n${backendBlock}\n}\n\n${resources.join('\n')}`;
}

async function sectionPlan() {
  line(`\n## terraform plan, ${RESOURCES} resources (wall time, ms)`);
  if (!which('terraform')) {
    line('**terraform is not on the PATH: this section is SKIPPED.**');
    return;
  }
  const sh = await startStatehouse();
  const stub = await startReference('bench-ref-s3stub.mjs', []);
  const scratch = tempDir('plan');
  try {
    const home = join(scratch, 'home');
    mkdirSync(home);
    writeFileSync(join(scratch, 'terraformrc'), '');
    writeFileSync(join(scratch, 'aws-credentials'), '');
    writeFileSync(
      join(scratch, 'aws-config'),
      `[profile statehouse]\nregion = us-east-1\ncredential_process = "${NODE}" "${CLI}" creds --json --server ${sh.url}\n`,
    );
    const env = {};
    for (const [k, v] of Object.entries(process.env)) {
      if (!/^(TF_|AWS_|STATEHOUSE_)/.test(k) && !/_proxy$/i.test(k) && k !== 'DATABASE_URL')
        env[k] = v;
    }
    // Node reads NODE_EXTRA_CA_CERTS when it starts, before any of our code runs: a machine that
    // sets it (this one points it at the whole system bundle) adds that to every Node start,
    // credential_process included. The server here speaks http, so it is left out, and the
    // cost it would add is reported beside the figures.
    const extraCa = env.NODE_EXTRA_CA_CERTS;
    delete env.NODE_EXTRA_CA_CERTS;
    Object.assign(env, {
      HOME: home,
      TF_CLI_CONFIG_FILE: join(scratch, 'terraformrc'),
      TF_IN_AUTOMATION: '1',
      CHECKPOINT_DISABLE: '1',
      AWS_CONFIG_FILE: join(scratch, 'aws-config'),
      AWS_SHARED_CREDENTIALS_FILE: join(scratch, 'aws-credentials'),
      AWS_EC2_METADATA_DISABLED: 'true',
      STATEHOUSE_TOKEN: sh.token,
    });
    const s3 = (credentials, endpoint = `${sh.url}/s3`) =>
      [
        '  backend "s3" {',
        '    bucket = "tfstate"',
        '    key = "bench/plan/terraform.tfstate"',
        '    region = "us-east-1"',
        '    use_lockfile = true',
        `    endpoints = { s3 = "${endpoint}" }`,
        '    use_path_style = true',
        '    skip_credentials_validation = true',
        '    skip_requesting_account_id = true',
        '    skip_region_validation = true',
        '    skip_metadata_api_check = true',
        credentials,
        '  }',
      ].join('\n');
    const c = sh.creds;
    const backends = {
      local: '  backend "local" {}',
      // The floor: the same backend against a stub that answers from memory and checks nothing.
      's3, in-memory stub (no checks)': s3(
        '    access_key = "AKIASTUB"\n    secret_key = "stub"',
        `${stub.origin}/s3`,
      ),
      's3, static credentials': s3(
        `    access_key = "${c.accessKeyId}"\n    secret_key = "${c.secretAccessKey}"\n    token = "${c.sessionToken}"`,
      ),
      's3, credential_process': s3('    profile = "statehouse"'),
    };
    const tf = (cwd, argv) => {
      const t0 = performance.now();
      const r = spawnSync('terraform', argv, { cwd, env, encoding: 'utf8', timeout: 600_000 });
      if (r.status !== 0)
        throw new Error(`terraform ${argv[0]} in ${cwd} failed:\n${r.stdout}\n${r.stderr}`);
      return { ms: performance.now() - t0, stdout: r.stdout };
    };
    const dirsByName = {};
    for (const [name, block] of Object.entries(backends)) {
      const work = join(scratch, name.replace(/\W+/g, '-'));
      mkdirSync(work);
      writeFileSync(join(work, 'main.tf'), mainTf(block));
      tf(work, ['init', '-input=false', '-no-color']);
      // The two s3 configurations share one state: the first applies, the second finds no changes.
      const apply = tf(work, ['apply', '-auto-approve', '-input=false', '-no-color']);
      if (!/Apply complete/.test(apply.stdout))
        throw new Error(`terraform apply (${name}) did not complete`);
      dirsByName[name] = work;
    }
    const runs = await interleaved(
      Object.fromEntries(
        Object.entries(dirsByName).map(([name, work]) => [
          name,
          () => {
            const r = tf(work, ['plan', '-input=false', '-no-color', '-lock=true']);
            if (!/No changes\./.test(r.stdout))
              throw new Error(`terraform plan (${name}) found changes`);
            return { perSecond: r.ms };
          },
        ]),
      ),
    );
    line('| backend | ms, median (min–max) | ratio to local |');
    line('|---|---|---|');
    for (const [k, r] of Object.entries(runs))
      line(`| ${k} | ${spread(r)} | ${fmt(ratio(r, runs.local), 2)} |`);
    // Paired by round (the two ran one after the other): the machine's drift cancels out.
    const statics = runs['s3, static credentials'];
    const extra = median(
      runs['s3, credential_process'].map((r, i) => r.perSecond - statics[i].perSecond),
    );
    const nodeStart = (extra) =>
      median(
        Array.from({ length: 7 }, () => {
          const t0 = performance.now();
          spawnSync(NODE, ['-e', '0'], { env: { ...env, ...extra } });
          return performance.now() - t0;
        }),
      );
    line(
      `| node -e 0 in this environment | ${fmt(nodeStart({}))} ms${extraCa ? `; with this machine's NODE_EXTRA_CA_CERTS (left out above) ${fmt(nodeStart({ NODE_EXTRA_CA_CERTS: extraCa }))} ms` : ''} | |`,
    );
    line(
      `| **goals** | static / local ${verdict(ratio(runs['s3, static credentials'], runs.local), 1.1, false)} (static / stub ${fmt(ratio(runs['s3, static credentials'], runs['s3, in-memory stub (no checks)']), 2)}); credential_process adds ${fmt(extra)} ms over static, median of the rounds' differences (goal ≤ 80: ${extra <= 80 ? 'met' : 'NOT met'}) | |`,
    );
  } finally {
    await Promise.all([sh.stop(), stub.stop()]);
  }
}

// ------------------------------------------------------------------ readyz

/** CPU time of a process and its waited-for children (utime, stime, cutime, cstime). */
function cpuMs(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return ([11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i]), 0) * 1000) / 100;
}

/** Polls /proc for processes whose parent is a server started meanwhile; their peak VmHWM. */
function sampleChildrenPeak() {
  let peak = 0;
  const timer = setInterval(() => {
    for (const pid of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
      try {
        const ppid = /PPid:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
        if (!ppid || readFileSync(`/proc/${ppid}/cmdline`, 'utf8').indexOf(CLI) < 0) continue;
        peak = Math.max(peak, procStatusMiB(pid, 'VmHWM') || 0);
      } catch {
        // gone meanwhile
      }
    }
  }, 25);
  return { stop: () => (clearInterval(timer), peak) };
}

async function sectionReadyz() {
  line('\n## time to the first healthy /readyz (embedded database, fs blobs)');
  const runs = { new: [], existing: [] };
  for (let i = 0; i < ROUNDS; i++) {
    const dataDir = join(tempDir('readyz'), 'data');
    for (const kind of ['new', 'existing']) {
      const children = sampleChildrenPeak();
      const t0 = performance.now();
      const proc = spawnServer([CLI, 'serve'], serverEnv({ STATEHOUSE_DATA_DIR: dataDir }), false);
      await readyUrl(proc);
      const ms = performance.now() - t0;
      runs[kind].push({
        ms,
        cpu: cpuMs(proc.pid),
        rss: procStatusMiB(proc.pid, 'VmHWM'),
        child: children.stop(),
      });
      await stopProcess(proc);
    }
  }
  line('| data dir | s, median (min–max) | CPU s, median | peak RSS MiB (server / child) | goal |');
  line('|---|---|---|---|---|');
  for (const [kind, goal] of [
    ['new', 4],
    ['existing', 1.5],
  ]) {
    const r = runs[kind].map((x) => ({ ...x, s: x.ms / 1000, cpuS: x.cpu / 1000 }));
    const m = median(r.map((x) => x.s));
    line(
      `| ${kind} | ${spread(r, 's', 2)} | ${fmt(median(r.map((x) => x.cpuS)), 2)} | ${fmt(Math.max(...r.map((x) => x.rss)))} / ${fmt(Math.max(...r.map((x) => x.child)))} | ≤ ${goal} s: ${m <= goal ? 'met' : 'NOT met'} |`,
    );
  }
}

// ------------------------------------------------------------------ main

const all = {
  get: sectionGet,
  'get-pg': sectionGetPg,
  put: sectionPut,
  locks: sectionLocks,
  plan: sectionPlan,
  readyz: sectionReadyz,
};
console.log(
  `Statehouse benchmarks — node ${process.version}, ${cpus().length} cores, ${new Date().toISOString()}; ` +
    `median of ${ROUNDS} interleaved runs of ${SECONDS} s; ${pinned ? 'load on core 1, servers on core 0' : 'not pinned (one core or no taskset)'}`,
);
try {
  for (const name of sections) {
    if (!all[name])
      throw new Error(`unknown section ${name}; known: ${Object.keys(all).join(', ')}`);
    await all[name]();
  }
} catch (e) {
  console.error(e);
  process.exitCode = 1;
} finally {
  await cleanup();
}
