// `npm run bench`: the figures the core issue asks for, measured against the real server
// process with load from a separate process (scripts/bench-load.mjs).
//
//  1. time to first healthy /readyz on the embedded default, new data dir and existing one;
//  2. HTTP-backend POST and GET of 1 MiB and 50 MiB states (requests/s, MB/s), server peak RSS;
//  3. lock acquire+release round trips per second, 32 concurrent clients, on PostgreSQL
//     (a throwaway cluster via scripts/with-postgres.sh unless DATABASE_URL is set).
//
// Options: --quick (shorter runs), --only=readyz|http|locks.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  baseEnv,
  buildIfStale,
  captureOutput,
  CLI,
  MiB,
  only,
  portFromProc,
  procStatusMiB,
  quick,
  root,
  stopProcess,
  TOKEN,
  waitReady,
} from './lib/bench-common.mjs';

buildIfStale();
const SECONDS = quick ? 4 : 10;

async function startServer(extraEnv) {
  const t0 = performance.now();
  const proc = spawn(process.execPath, [CLI, 'serve'], {
    env: {
      ...baseEnv(),
      NODE_ENV: 'production',
      PORT: '0',
      STATEHOUSE_HOST: '127.0.0.1',
      STATEHOUSE_BOOTSTRAP_TOKEN: TOKEN,
      STATEHOUSE_LOG_LEVEL: 'warn',
      ...extraEnv,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const log = captureOutput(proc);
  const deadline = Date.now() + 120_000;
  // The listening line is logged at info; with level warn, find the port from /proc instead.
  const port = await portFromProc(proc, log, deadline, 10);
  const url = `http://127.0.0.1:${port}`;
  await waitReady(url, proc, log, deadline, 10);
  const readyMs = performance.now() - t0;
  const readyCpuMs = cpuMs(proc.pid);
  return {
    url,
    proc,
    readyMs,
    readyCpuMs,
    peakRssMiB: () => procStatusMiB(proc.pid, 'VmHWM'),
    stop: () => stopProcess(proc),
  };
}

function load(scenario, url, concurrency, size = 0) {
  const out = execFileSync(
    process.execPath,
    [
      join(root, 'scripts/bench-load.mjs'),
      scenario,
      url,
      TOKEN,
      String(concurrency),
      String(SECONDS),
      String(size),
    ],
    { encoding: 'utf8', maxBuffer: 1 << 20 },
  );
  return JSON.parse(out.trim().split('\n').pop());
}

const report = [];
const line = (s) => {
  report.push(s);
  console.log(s);
};

console.log(
  `Statehouse benchmarks — node ${process.version}, ${new Date().toISOString()}${quick ? ' (quick)' : ''}`,
);

if (!only || only === 'readyz') {
  line('\n## time to first healthy /readyz (embedded database, fs blobs)');
  const dir = mkdtempSync(join(tmpdir(), 'statehouse-bench-'));
  const RUNS = quick ? 2 : 5;
  try {
    const runs = { new: [], existing: [] };
    for (let i = 0; i < RUNS; i++) {
      const d = join(dir, `new-${i}`);
      for (const [kind, env] of [
        ['new', { STATEHOUSE_DATA_DIR: d }],
        ['existing', { STATEHOUSE_DATA_DIR: d }],
      ]) {
        // A child the server starts (the initdb fallback) has its own peak: sample it too.
        const children = sampleChildrenPeak();
        const s = await startServer(env);
        const child = children.stop();
        runs[kind].push({ ms: s.readyMs, cpu: s.readyCpuMs, rss: s.peakRssMiB(), child });
        await s.stop();
      }
    }
    for (const kind of ['new', 'existing']) {
      const r = runs[kind];
      const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
      const child = Math.max(...r.map((x) => x.child));
      line(
        `${`${kind} data dir:`.padEnd(19)}median ${(median(r.map((x) => x.ms)) / 1000).toFixed(2)} s ` +
          `(${r.map((x) => (x.ms / 1000).toFixed(2)).join(', ')}); ` +
          `CPU median ${(median(r.map((x) => x.cpu)) / 1000).toFixed(2)} s; server peak RSS ` +
          `${Math.max(...r.map((x) => x.rss)).toFixed(0)} MiB` +
          (child > 0 ? `, child process peak ${child.toFixed(0)} MiB` : ''),
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * CPU time a process and its waited-for children used (utime, stime, cutime, cstime): unlike
 * the wall clock, hardly changed by other work on a shared machine.
 */
function cpuMs(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  const ticks = [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i]), 0);
  return (ticks * 1000) / 100; // USER_HZ
}

/** Polls /proc for processes whose parent is a server started meanwhile; their peak VmHWM. */
function sampleChildrenPeak() {
  let peak = 0;
  const timer = setInterval(() => {
    for (const pid of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
      try {
        const status = readFileSync(`/proc/${pid}/status`, 'utf8');
        const ppid = /PPid:\s+(\d+)/.exec(status)?.[1];
        if (!ppid || readFileSync(`/proc/${ppid}/cmdline`, 'utf8').indexOf(CLI) < 0) continue;
        peak = Math.max(peak, procStatusMiB(pid, 'VmHWM') || 0);
      } catch {
        // gone meanwhile
      }
    }
  }, 25);
  return { stop: () => (clearInterval(timer), peak) };
}

if (!only || only === 'http') {
  line('\n## HTTP backend, embedded database, fs blobs (load from a separate process)');
  line('| state | op | clients | req/s | MB/s | p50 ms | p99 ms | non-200 | server peak RSS |');
  line('|---|---|---|---|---|---|---|---|---|');
  for (const [size, conc] of [
    [1 * MiB, 8],
    [50 * MiB, 2],
    [200 * MiB, 1],
  ]) {
    const dir = mkdtempSync(join(tmpdir(), 'statehouse-bench-'));
    // Start twice: the numbers are for a server on an existing data dir, as in production.
    await (await startServer({ STATEHOUSE_DATA_DIR: dir })).stop();
    const s = await startServer({ STATEHOUSE_DATA_DIR: dir });
    const idleRss = s.peakRssMiB();
    try {
      for (const op of ['post', 'get']) {
        const r = load(op, s.url, conc, size);
        line(
          `| ${size / MiB} MiB | ${op.toUpperCase()} | ${conc} | ${r.perSecond} | ${r.mbPerSecond} | ${r.p50ms} | ${r.p99ms} | ${r.other} | ${s.peakRssMiB().toFixed(0)} MiB (idle ${idleRss.toFixed(0)}) |`,
        );
      }
    } finally {
      await s.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }
}

if (!only || only === 'locks') {
  if (!process.env.DATABASE_URL) {
    line('\n## locks on PostgreSQL: starting a throwaway cluster (scripts/with-postgres.sh)');
    try {
      const out = execFileSync(
        join(root, 'scripts/with-postgres.sh'),
        [
          process.execPath,
          fileURLToPath(import.meta.url),
          '--only=locks',
          ...(quick ? ['--quick'] : []),
        ],
        {
          encoding: 'utf8',
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      );
      for (const l of out.split('\n').filter((l) => l.startsWith('|') || l.startsWith('##')))
        line(l);
    } catch (e) {
      line(`PostgreSQL lock benchmark could not run: ${e.message.split('\n')[0]}`);
    }
  } else {
    line('\n## lock acquire+release round trips, PostgreSQL, HTTP backend LOCK/UNLOCK');
    line('| clients | states | round trips/s | p50 ms | p99 ms | refused (423) |');
    line('|---|---|---|---|---|---|');
    const dir = mkdtempSync(join(tmpdir(), 'statehouse-bench-'));
    const s = await startServer({
      STATEHOUSE_DATA_DIR: dir,
      DATABASE_URL: process.env.DATABASE_URL,
      STATEHOUSE_DATABASE_POOL_SIZE: '20',
    });
    try {
      const own = load('lock', s.url, 32);
      line(
        `| 32 | one each | ${own.perSecond} | ${own.p50ms} | ${own.p99ms} | ${own.statuses['423'] ?? 0} |`,
      );
      const one = load('lock-contended', s.url, 32);
      line(
        `| 32 | one shared | ${one.perSecond} | ${one.p50ms} | ${one.p99ms} | ${one.statuses['423'] ?? 0} |`,
      );
    } finally {
      await s.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }
}
