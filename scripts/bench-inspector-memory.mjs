// `node scripts/bench-inspector-memory.mjs [--mib=400] [--at-once=1,4] [--budget=<size>]`:
// the server's peak memory while it receives states made of large `terraform_remote_state`
// data sources (issue 9, item 2), against the real server process.
//
//  Each state is ~400 MiB (--mib): a Terraform v4 state whose `resources` are
//  `terraform_remote_state` data sources of ~30 MiB each — half `config` (a large map beside the
//  address), half `outputs` (a large map output beside a small one) — pointing at a state of
//  this server, so they are
//  edges. The body is generated while it is sent (this script never holds it) with its exact
//  Content-Length, through the HTTP backend, like Terraform. For each --at-once count, that many
//  consumers are written at the same time (one state each) to a fresh server (embedded
//  database, file blobs, in a temporary directory), and the server's RSS is sampled every 10 ms
//  from /proc: reported as the growth of the peak over the RSS just before the writes, with
//  VmHWM (the kernel's own peak), each write's status and the wall time. A server that dies
//  (out of heap) is reported as such.
//
//  --budget sets STATEHOUSE_INSPECTION_MAX_BYTES (default: room for every write at once, so the
//  figure is the inspector's own cost; with the default budget, writes beyond it wait).
//  Linux only (/proc). Everything listens on 127.0.0.1; every process and temporary directory
//  this script made is removed at the end, on failure or on Ctrl-C.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  baseEnv,
  buildIfStale,
  captureOutput,
  CLI,
  HOST,
  MiB,
  onStopSignal,
  procStatusMiB,
  readyFromLog,
  sleep,
  stopProcess,
  textArg as arg,
  TOKEN,
} from './lib/bench-common.mjs';

buildIfStale();
const TOTAL_MIB = Number(arg('mib', '400'));
const AT_ONCE = arg('at-once', '1,4').split(',').map(Number);
const BUDGET = arg('budget', undefined);
const SOURCE_MIB = 30;

const children = new Set();
const tempDirs = new Set();
const progress = (s) => process.stderr.write(`bench-inspector-memory: ${s}\n`);

async function cleanupAll() {
  for (const p of children) {
    if (p.exitCode === null && p.signalCode === null) {
      const exited = new Promise((r) => p.once('exit', r));
      p.kill('SIGKILL');
      await exited;
    }
  }
  for (const d of tempDirs) rmSync(d, { recursive: true, force: true });
}
onStopSignal(cleanupAll);

// ------------------------------------------------------------------ the state, generated

/**
 * The body as a sequence of string pieces, generated on demand. Every call yields the same
 * pieces (so the length can be counted first, then the body sent).
 */
function* statePieces(baseUrl, consumer) {
  const sources = Math.max(1, Math.round(TOTAL_MIB / SOURCE_MIB));
  const half = (SOURCE_MIB / 2) * MiB;
  const value = 'v'.repeat(200);
  const entry = (i) => `"key-${String(i).padStart(8, '0')}":"${value}"`;
  const entryLen = entry(0).length + 1; // with its comma
  const entries = Math.floor(half / entryLen);
  /** `{` + `extra` (members ending with a comma, or nothing) + `entries` members + `}`. */
  function* bigMap(extra) {
    yield `{${extra}`;
    for (let i = 0; i < entries; i += 256) {
      const batch = [];
      for (let j = i; j < Math.min(entries, i + 256); j++) batch.push(entry(j));
      yield (i > 0 ? ',' : '') + batch.join(',');
    }
    yield '}';
  }
  yield `{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"${consumer}",`;
  yield `"outputs":{"ok":{"value":true,"type":"bool"}},"resources":[`;
  for (let s = 0; s < sources; s++) {
    yield `${s > 0 ? ',' : ''}{"mode":"data","type":"terraform_remote_state","name":"src${s}",`;
    yield `"provider":"provider[\\"terraform.io/builtin/terraform\\"]","instances":[{"schema_version":0,"attributes":{`;
    yield `"backend":"http","config":{"value":`;
    yield* bigMap(
      `"address":"${baseUrl}/v1/backend/bench/producer","username":"tf","password":"bench-secret",`,
    );
    // The producer's outputs as read: one large map output beside a small one.
    yield `,"type":["object",{}]},"defaults":null,"outputs":{"value":{"region":"eu-west-1","subnets":`;
    yield* bigMap('');
    yield `},"type":["object",{}]},"workspace":null},"sensitive_attributes":[]}]}`;
  }
  yield `],"check_results":null}\n`;
}

function bodyLength(baseUrl, consumer) {
  let n = 0;
  for (const piece of statePieces(baseUrl, consumer)) n += Buffer.byteLength(piece);
  return n;
}

/** POSTs one generated state through the HTTP backend; resolves with the status (or an error). */
function writeState(baseUrl, unit) {
  const length = bodyLength(baseUrl, unit);
  return new Promise((resolve) => {
    const u = new URL(`${baseUrl}/v1/backend/${unit}`);
    const req = http.request({
      host: u.hostname,
      port: u.port,
      path: u.pathname,
      method: 'POST',
      headers: {
        authorization: `Basic ${Buffer.from(`tf:${TOKEN}`).toString('base64')}`,
        'content-type': 'application/json',
        'content-length': String(length),
      },
    });
    const t0 = performance.now();
    req.on('response', (res) => {
      const chunks = [];
      res.on('data', (d) => chunks.push(d));
      res.on('end', () =>
        resolve({
          status: res.statusCode,
          ms: performance.now() - t0,
          body: Buffer.concat(chunks).toString().slice(0, 300),
        }),
      );
    });
    req.on('error', (e) =>
      resolve({ status: `error (${e.code ?? e.message})`, ms: performance.now() - t0 }),
    );
    const it = statePieces(baseUrl, unit);
    const pump = () => {
      for (;;) {
        const { value, done } = it.next();
        if (done) return req.end();
        if (!req.write(value)) return req.once('drain', pump);
      }
    };
    pump();
  }).then((r) => ({ ...r, bytes: length }));
}

// ------------------------------------------------------------------ the server

async function startServer() {
  const dir = mkdtempSync(join(tmpdir(), 'statehouse-bench-mem-'));
  tempDirs.add(dir);
  const perWrite = Math.ceil((TOTAL_MIB * MiB * 1.05) / MiB);
  const proc = spawn(process.execPath, [CLI, 'serve'], {
    env: {
      ...baseEnv(),
      NODE_ENV: 'production',
      PORT: '0',
      STATEHOUSE_HOST: HOST,
      STATEHOUSE_DATA_DIR: dir,
      STATEHOUSE_BOOTSTRAP_TOKEN: TOKEN,
      STATEHOUSE_LOG_LEVEL: 'info', // the "listening on" line is logged at info
      STATEHOUSE_MAX_STATE_BYTES: `${Math.max(512, perWrite)}MiB`,
      STATEHOUSE_INSPECTION_MAX_BYTES:
        BUDGET ?? `${Math.max(1024, perWrite * Math.max(...AT_ONCE))}MiB`,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(proc);
  const log = captureOutput(proc, 64 * 1024);
  const { url } = await readyFromLog(proc, log);
  return {
    url,
    proc,
    log,
    rss: () => procStatusMiB(proc.pid, 'VmRSS'),
    hwm: () => procStatusMiB(proc.pid, 'VmHWM'),
    stop: async () => {
      await stopProcess(proc);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// ------------------------------------------------------------------ the runs

async function run(atOnce) {
  const server = await startServer();
  // Warm up: one small write (module loading, the first transaction).
  const warm = await fetch(`${server.url}/v1/backend/bench/producer`, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`tf:${TOKEN}`).toString('base64')}` },
    body: JSON.stringify({ version: 4, serial: 1, lineage: 'p', outputs: {}, resources: [] }),
  });
  if (warm.status !== 200) throw new Error(`warm-up write answered ${warm.status}`);
  await sleep(500);
  const base = server.rss();
  let peak = base;
  const sampler = setInterval(() => {
    const r = server.rss();
    if (Number.isFinite(r)) peak = Math.max(peak, r);
  }, 10);
  const t0 = performance.now();
  const results = await Promise.all(
    Array.from({ length: atOnce }, (_, i) => writeState(server.url, `bench/consumer-${i}`)),
  );
  const wall = performance.now() - t0;
  clearInterval(sampler);
  const alive = server.proc.exitCode === null && server.proc.signalCode === null;
  const hwm = server.hwm();
  const died = alive
    ? ''
    : ` — the server died (${server.proc.signalCode ?? `exit ${server.proc.exitCode}`}): ${/heap|memory/i.exec(server.log())?.[0] ?? 'see its log'}`;
  await server.stop();
  return { atOnce, base, peak, hwm, wall, results, died };
}

try {
  const out = [];
  for (const n of AT_ONCE) {
    progress(`${n} write(s) of ~${TOTAL_MIB} MiB at once…`);
    out.push(await run(n));
  }
  console.log(
    `\nPeak server RSS while writing ~${TOTAL_MIB} MiB states of ${SOURCE_MIB} MiB terraform_remote_state data sources (node ${process.version})`,
  );
  console.log(
    'at once | body MiB each | RSS before | peak RSS | growth | VmHWM | wall s | answers',
  );
  for (const r of out) {
    const mib = (r.results[0]?.bytes ?? 0) / MiB;
    const answers = r.results.map((x) => x.status).join(' ');
    for (const x of r.results) if (x.status !== 200 && x.body) progress(`answer: ${x.body}`);
    console.log(
      `${r.atOnce} | ${mib.toFixed(0)} | ${r.base.toFixed(0)} MiB | ${r.peak.toFixed(0)} MiB | +${(r.peak - r.base).toFixed(0)} MiB | ${Number.isFinite(r.hwm) ? `${r.hwm.toFixed(0)} MiB` : '—'} | ${(r.wall / 1000).toFixed(1)} | ${answers}${r.died}`,
    );
  }
} finally {
  await cleanupAll();
}
