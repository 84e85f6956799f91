// `node scripts/bench-graph.mjs [--quick] [--only=embedded|postgres]`: the figures of the
// dependency-graph feature, against the real server process.
//
//  Set-up: 2,000 units in three layers — 300 "network" producers, 500 "service" units reading
//  them, 1,200 "app" units reading both (services twice as often) — written through the HTTP
//  backend (8 in flight) as Terraform v4 states whose `terraform_remote_state` data sources
//  point at this server, so the server discovers 10,000 edges (in-degree skewed, 1 to 50 per
//  consumer). Then some producers are applied with a changed output until 12–18 % of the
//  consumers are red (and, downstream of red services, many yellow).
//
//  (a) `GET /v1/graph/stale` over that graph, repeated (p50/p90/max, response size, items); the
//      same request with a prefix nothing matches (the whole-graph load and analysis alone, no
//      items); and `GET /v1/graph` for comparison. Every run is listed in order too: on
//      PostgreSQL the first runs may precede autovacuum's first ANALYZE of the freshly loaded
//      tables, so the stale request is timed again after an explicit ANALYZE;
//  (b) the time of one state write whose 50 remote-state data sources are edges (replaced in
//      the write's transaction), repeated with alternating outputs so every write is a new
//      version, against a write of the same size without remote states (the baseline), one
//      with 50 remote states pointing at another server (parsed, but no edge), and one whose
//      50 edges alternate between two sets (50 inserted + 50 deleted per write). The four kinds
//      alternate, so drift on a noisy machine hits them alike.
//
//  On the embedded database (default) and on PostgreSQL (a throwaway cluster via
//  scripts/with-postgres.sh unless DATABASE_URL is set); the server's peak RSS (VmHWM) after.
//  --quick: 500 units, 2,500 edges, fewer runs (the write benchmark keeps its 50 edges).
//  Everything listens on and talks to 127.0.0.1 only; every process started is stopped and
//  every temporary directory removed, on success, failure or Ctrl-C.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  baseEnv,
  buildIfStale,
  captureOutput,
  CLI,
  exchange,
  HOST,
  only,
  onStopSignal,
  procStatusMiB,
  quick,
  readyFromLog,
  require,
  root,
  sleep,
  stopProcess,
  TOKEN,
} from './lib/bench-common.mjs';

buildIfStale();
const RESULT_MARK = '@@bench-graph-result ';

const UNITS = quick ? 500 : 2000;
const EDGES = quick ? 2500 : 10_000;
const MAX_IN = 50; // remote-state data sources of one consumer, at most
const RED_SHARE = [0.12, 0.18]; // of the consumers: aim for the first, never beyond the second
const LOAD_IN_FLIGHT = 8;
const STALE_RUNS = quick ? 5 : 20;
const GRAPH_RUNS = quick ? 1 : 2;
const WRITE_RUNS = quick ? 10 : 30;
const WRITE_EDGES = 50;
const REMOTE_PASSWORD = 'bench-remote-state-password';

// ------------------------------------------------------------------ bookkeeping

const children = new Set();
const tempDirs = new Set();
const agents = new Set();
let stopping = false;
function tempDir(tag) {
  const d = mkdtempSync(join(tmpdir(), `statehouse-bench-graph-${tag}-`));
  tempDirs.add(d);
  return d;
}
/** Stops what this script started: servers by pid, the PostgreSQL wrapper by its own group. */
async function cleanupAll() {
  for (const p of children) {
    if (p.exitCode === null && p.signalCode === null) {
      const exited = new Promise((r) => p.once('exit', r));
      const kill = (sig) => {
        try {
          if (p.groupLeader) process.kill(-p.pid, sig);
          else p.kill(sig);
        } catch {
          // already gone
        }
      };
      kill('SIGTERM');
      await Promise.race([exited, sleep(15_000).then(() => kill('SIGKILL'))]);
    }
  }
  for (const d of tempDirs) rmSync(d, { recursive: true, force: true });
}
onStopSignal(() => {
  stopping = true; // no new request; open connections closed so servers stop at once
  for (const a of agents) a.destroy();
  return cleanupAll();
});

const progress = (s) => process.stderr.write(`bench-graph: ${s}\n`);
const fmt = (n, digits = 0) =>
  Number.isFinite(n)
    ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : '—';
function stats(samples) {
  const s = [...samples].sort((a, b) => a - b);
  const pct = (p) => s[Math.min(s.length - 1, Math.ceil(s.length * p) - 1)] ?? NaN;
  return {
    n: s.length,
    p50: pct(0.5),
    p90: pct(0.9),
    max: s[s.length - 1] ?? NaN,
    mean: s.reduce((a, b) => a + b, 0) / s.length,
  };
}

/** mulberry32: a small seeded PRNG, so every run builds the same graph. */
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// ------------------------------------------------------------------ the server

/** `statehouse serve` on PORT=0; the port is read from its "listening on" line. */
async function startServer(extraEnv) {
  const proc = spawn(process.execPath, [CLI, 'serve'], {
    env: {
      ...baseEnv(),
      NODE_ENV: 'production',
      PORT: '0',
      STATEHOUSE_HOST: HOST,
      STATEHOUSE_BOOTSTRAP_TOKEN: TOKEN,
      // info: the "listening on" line is logged at info (so is one line per request).
      STATEHOUSE_LOG_LEVEL: 'info',
      ...extraEnv,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(proc);
  proc.once('exit', () => children.delete(proc));
  const log = captureOutput(proc, 256 * 1024); // a tail, for error messages
  const { port, url } = await readyFromLog(proc, log);
  return {
    url,
    port,
    log,
    peakRssMiB: () => procStatusMiB(proc.pid, 'VmHWM'),
    rssMiB: () => procStatusMiB(proc.pid, 'VmRSS'),
    stop: () => stopProcess(proc),
  };
}

/** HTTP/1.1 with keep-alive over node:http; resolves with status, body and elapsed ms. */
function client(baseUrl, sockets) {
  const u = new URL(baseUrl);
  const agent = new http.Agent({ keepAlive: true, maxSockets: sockets });
  agents.add(agent);
  const basic = `Basic ${Buffer.from(`x:${TOKEN}`).toString('base64')}`;
  const send = (method, path, { body, basicAuth = false } = {}) => {
    if (stopping) return Promise.reject(new Error('stopping'));
    const headers = { authorization: basicAuth ? basic : `Bearer ${TOKEN}` };
    if (body !== undefined) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = String(body.length);
    }
    return exchange(agent, u, method, path, headers, body);
  };
  const ok = async (method, path, opts) => {
    const r = await send(method, path, opts);
    if (r.status !== 200 && r.status !== 201) {
      throw new Error(`${method} ${path} answered ${r.status}: ${r.body.toString().slice(0, 500)}`);
    }
    return r;
  };
  return {
    send,
    ok,
    close: () => {
      agent.destroy();
      agents.delete(agent);
    },
  };
}

// ------------------------------------------------------------------ states

/** A Terraform v4 state (as Terraform writes it: indented), shaped like test/e2e/graph.spec.ts. */
function tfstate({ lineage, serial, outputs, remotes = [], managed = 2, pad = 0 }) {
  const resources = remotes.map((r) => ({
    mode: 'data',
    type: 'terraform_remote_state',
    name: r.name,
    provider: 'provider["terraform.io/builtin/terraform"]',
    instances: [
      {
        schema_version: 0,
        attributes: {
          backend: 'http',
          config: {
            value: { address: r.address, username: 'terraform', password: REMOTE_PASSWORD },
            type: ['object', {}],
          },
          defaults: null,
          outputs: { value: r.outputs, type: ['object', {}] },
          workspace: null,
        },
        sensitive_attributes: [],
      },
    ],
  }));
  for (let i = 0; i < managed; i++) {
    resources.push({
      mode: 'managed',
      type: 'terraform_data',
      name: i === 0 && pad > 0 ? 'pad' : `r${i}`,
      provider: 'provider["terraform.io/builtin/terraform"]',
      instances: [
        {
          schema_version: 0,
          attributes: {
            id: `${lineage.slice(-12)}-${i}`,
            input: { value: i === 0 && pad > 0 ? 'x'.repeat(pad) : `in-${i}`, type: 'string' },
            output: null,
            triggers_replace: null,
          },
          sensitive_attributes: [],
        },
      ],
    });
  }
  return Buffer.from(
    `${JSON.stringify(
      {
        version: 4,
        terraform_version: '1.11.4',
        serial,
        lineage,
        outputs: Object.fromEntries(
          Object.entries(outputs).map(([k, v]) => [
            k,
            { value: v, type: typeof v === 'string' ? 'string' : 'dynamic' },
          ]),
        ),
        resources,
        check_results: null,
      },
      null,
      2,
    )}\n`,
  );
}

// ------------------------------------------------------------------ the graph

/**
 * The units and their inputs: layer 0 (network producers, no inputs), layer 1 (services,
 * reading layer 0), layer 2 (apps, reading layer 1 twice as often as layer 0). In-degrees are
 * skewed (most read a few states, a few read many, one reads 50) and sum to EDGES; popular
 * producers are read more often.
 */
function buildGraph() {
  const rnd = prng(20_000);
  const n0 = Math.round(UNITS * 0.15);
  const n1 = Math.round(UNITS * 0.25);
  const n2 = UNITS - n0 - n1;
  const e1 = Math.round(EDGES * 0.2);
  const e2 = EDGES - e1;
  const units = [];
  const add = (layer, i, name, outputs) => {
    const u = { name, layer, i, outputs, inputs: [], read: new Map(), serial: 0 };
    units.push(u);
    return u;
  };
  const l0 = Array.from({ length: n0 }, (_, i) =>
    add(0, i, `bench/net/p-${String(i).padStart(4, '0')}`, {
      vpc_id: `vpc-${(0x10000000 + i * 7919).toString(16)}`,
      cidr: `10.${i >> 8}.${i & 255}.0/24`,
      subnet_ids: [0, 1, 2].map((k) => `subnet-${(0x20000000 + i * 3 + k).toString(16)}`),
      tags: { team: `team-${i % 40}`, env: ['dev', 'staging', 'prod'][i % 3] },
    }),
  );
  const l1 = Array.from({ length: n1 }, (_, i) =>
    add(1, i, `bench/svc/m-${String(i).padStart(4, '0')}`, {
      endpoint: `https://svc-${i}.internal:${8000 + (i % 100)}`,
      security_group_id: `sg-${(0x30000000 + i * 104729).toString(16)}`,
      port: 8000 + (i % 100),
    }),
  );
  const l2 = Array.from({ length: n2 }, (_, i) =>
    add(2, i, `bench/app/c-${String(i).padStart(4, '0')}`, {
      url: `https://app-${i}.example.com`,
      revision: 'r1',
    }),
  );

  /** Skewed degrees in [1, MAX_IN] summing to `total`; the first one is MAX_IN. */
  const degrees = (n, total, maxDeg) => {
    const avg = total / n;
    const d = Array.from({ length: n }, () =>
      Math.min(maxDeg, 1 + Math.floor(-Math.log(1 - rnd()) * (avg - 1))),
    );
    d[0] = maxDeg;
    let sum = d.reduce((a, b) => a + b, 0);
    while (sum !== total) {
      const k = 1 + Math.floor(rnd() * (n - 1));
      if (sum > total && d[k] > 1) (d[k]--, sum--);
      else if (sum < total && d[k] < maxDeg) (d[k]++, sum++);
    }
    return d;
  };
  /** A popular-first pick: low indexes are read far more often (x² skew). */
  const pick = (pool) => pool[Math.floor(pool.length * rnd() ** 2)];
  const choose = (u, deg, pools) => {
    const chosen = new Set();
    while (chosen.size < deg) {
      const pool = pools[Math.floor(rnd() * pools.length)];
      chosen.add(rnd() < 0.5 ? pick(pool) : pool[Math.floor(rnd() * pool.length)]);
    }
    u.inputs = [...chosen];
  };
  const d1 = degrees(n1, e1, Math.min(MAX_IN, 20));
  l1.forEach((u, k) => choose(u, d1[k], [l0]));
  const d2 = degrees(n2, e2, MAX_IN);
  l2.forEach((u, k) => choose(u, d2[k], [l0, l1, l1])); // services twice as often
  return { units, l0, l1, l2 };
}

const remoteName = (p) => p.name.replace(/^bench\//, '').replace(/[/-]/g, '_');
const clone = (v) => JSON.parse(JSON.stringify(v));
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

/** The body of a unit's next write: it reads its producers' current outputs, as an apply does. */
function nextState(u, self) {
  u.serial++;
  const remotes = u.inputs.map((p) => {
    u.read.set(p, clone(p.outputs));
    return { name: remoteName(p), address: `${self}/v1/backend/${p.name}`, outputs: p.outputs };
  });
  return tfstate({ lineage: `lineage-${u.name}`, serial: u.serial, outputs: u.outputs, remotes });
}

/** What the server should answer: red (an input changed since read), yellow (red upstream). */
function expectedStatus(units) {
  const status = new Map();
  const out = new Map();
  for (const u of units) {
    for (const p of u.inputs) (out.get(p) ?? out.set(p, []).get(p)).push(u);
    if (u.inputs.some((p) => !same(u.read.get(p), p.outputs))) status.set(u, 'red');
  }
  const queue = [...status.keys()];
  const seen = new Set(queue);
  while (queue.length > 0) {
    for (const c of out.get(queue.pop()) ?? []) {
      if (seen.has(c)) continue;
      seen.add(c);
      if (!status.has(c)) status.set(c, 'yellow');
      queue.push(c);
    }
  }
  const count = (s) => [...status.values()].filter((v) => v === s).length;
  return { red: count('red'), yellow: count('yellow') };
}

async function pool(items, inFlight, fn) {
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < items.length) await fn(items[next++]);
    }),
  );
}

// ------------------------------------------------------------------ one database, end to end

async function benchDatabase(db) {
  const env = { STATEHOUSE_DATA_DIR: tempDir(db) };
  if (db === 'postgres') {
    env.DATABASE_URL = process.env.DATABASE_URL;
    env.STATEHOUSE_DATABASE_POOL_SIZE = '20';
  }
  progress(`${db}: starting the server`);
  const server = await startServer(env);
  const api = client(server.url, LOAD_IN_FLIGHT);
  const result = { db, reads: [], writes: [], startedAt: Date.now() };
  try {
    result.idleRssMiB = server.peakRssMiB();
    const write = (unitName, body) =>
      api.ok('POST', `/v1/backend/${unitName}`, { body, basicAuth: true });

    // ---- set-up: 2,000 states, layer by layer, 8 in flight.
    const g = buildGraph();
    const consumers = [...g.l1, ...g.l2];
    const edgeCount = consumers.reduce((a, u) => a + u.inputs.length, 0);
    const loadMs = [];
    const t0 = performance.now();
    for (const [k, layer] of [g.l0, g.l1, g.l2].entries()) {
      await pool(layer, LOAD_IN_FLIGHT, async (u) => {
        const r = await write(u.name, nextState(u, server.url));
        loadMs.push(r.ms);
      });
      progress(`${db}: layer ${k} written (${layer.length} states)`);
    }
    const loadSeconds = (performance.now() - t0) / 1000;

    // ---- change producers until 12–18 % of the consumers are red.
    const rnd = prng(7);
    const candidates = [...g.l0, ...g.l1]
      .map((u) => [rnd(), u])
      .sort((a, b) => a[0] - b[0])
      .map(([, u]) => u);
    const changed = [];
    for (const p of candidates) {
      if (expectedStatus(g.units).red >= RED_SHARE[0] * consumers.length) break;
      const before = clone(p.outputs);
      if (p.layer === 0) p.outputs.vpc_id = `${p.outputs.vpc_id}-v2`;
      else p.outputs.endpoint = `${p.outputs.endpoint}/v2`;
      if (expectedStatus(g.units).red > RED_SHARE[1] * consumers.length) {
        p.outputs = before; // too popular: would overshoot
        continue;
      }
      changed.push(p);
    }
    // Applied producers first (a changed service re-reads its inputs, as an apply does).
    changed.sort((a, b) => a.layer - b.layer);
    const tc = performance.now();
    for (const p of changed) await write(p.name, nextState(p, server.url));
    const changeSeconds = (performance.now() - tc) / 1000;
    const expected = expectedStatus(g.units);
    progress(
      `${db}: ${changed.length} producers changed; expecting ${expected.red} red, ${expected.yellow} yellow`,
    );
    result.setup = {
      units: g.units.length,
      edges: edgeCount,
      maxIn: Math.max(...consumers.map((u) => u.inputs.length)),
      loadSeconds,
      loadStats: stats(loadMs),
      changed: changed.length,
      changeSeconds,
      expected,
      consumers: consumers.length,
    };
    result.loadedRssMiB = server.peakRssMiB();

    // ---- (a) GET /v1/graph/stale, and GET /v1/graph for comparison.
    const timeGet = async (label, path, runs, warm, check) => {
      const ms = [];
      let last;
      for (let i = 0; i < warm + runs; i++) {
        const r = await api.ok('GET', path);
        if (i >= warm) ms.push(r.ms);
        last = r;
      }
      const json = JSON.parse(last.body.toString('utf8'));
      result.reads.push({
        label,
        ...stats(ms),
        series: ms.map((m) => Math.round(m)),
        at: Date.now(),
        bytes: last.body.length,
        ...check(json),
      });
      progress(`${db}: ${label} done`);
    };
    await timeGet('GET /v1/graph/stale', '/v1/graph/stale', STALE_RUNS, 2, (j) => {
      const red = j.items.filter((i) => i.status === 'red').length;
      const yellow = j.items.filter((i) => i.status === 'yellow').length;
      if (red !== expected.red || yellow !== expected.yellow) {
        result.mismatch = `the server answered ${red} red / ${yellow} yellow, the script expected ${expected.red} / ${expected.yellow}`;
      }
      const staleInputs = j.items.reduce((a, i) => a + i.inputs.length, 0);
      return {
        items: `${j.items.length} (${red} red, ${yellow} yellow; ${staleInputs} stale inputs)`,
      };
    });
    await timeGet(
      'GET /v1/graph/stale?prefix=none/ (whole-graph load + analysis, no items)',
      '/v1/graph/stale?prefix=none/',
      STALE_RUNS,
      1,
      (j) => ({ items: String(j.items.length) }),
    );
    await timeGet('GET /v1/graph', '/v1/graph', GRAPH_RUNS, 1, (j) => ({
      items: `${j.nodes.length} nodes, ${j.edges.length} edges`,
    }));
    if (db === 'postgres') {
      // The runs above may precede autovacuum's first ANALYZE of the freshly loaded tables.
      result.analysed = await lastAnalysed(result.startedAt);
      await withPg((c) => c.query('ANALYZE'));
      await timeGet(
        'GET /v1/graph/stale, after an explicit ANALYZE',
        '/v1/graph/stale',
        STALE_RUNS,
        1,
        (j) => ({ items: String(j.items.length) }),
      );
    }

    // ---- (b) one write touching 50 edges, against a baseline of the same size.
    const producers = [...g.l0.slice(0, 60), ...g.l1.slice(0, 60)];
    const setA = producers.filter((_, i) => i % 2 === 0).slice(0, WRITE_EDGES);
    const setB = producers.filter((_, i) => i % 2 === 1).slice(0, WRITE_EDGES);
    const foreign = 'http://statehouse.other.example:8080';
    const remotesOf = (set, base) =>
      set.map((p) => ({
        name: remoteName(p),
        address: `${base}/v1/backend/${p.name}`,
        outputs: p.outputs,
      }));
    const kinds = [
      {
        label: 'baseline: no remote state',
        unit: 'bench/write/baseline',
        remotes: () => [],
        edges: 0,
      },
      {
        label: `${WRITE_EDGES} remote states on another server (parsed, no edge)`,
        unit: 'bench/write/foreign',
        remotes: () => remotesOf(setA, foreign),
        edges: 0,
      },
      {
        label: `${WRITE_EDGES} edges, same producers each write (${WRITE_EDGES} upserts)`,
        unit: 'bench/write/graph',
        remotes: () => remotesOf(setA, server.url),
        edges: WRITE_EDGES,
      },
      {
        label: `${WRITE_EDGES} edges, producers alternate (${WRITE_EDGES} inserts + ${WRITE_EDGES} deletes)`,
        unit: 'bench/write/graph-swap',
        remotes: (k) => remotesOf(k % 2 === 0 ? setA : setB, server.url),
        edges: WRITE_EDGES,
      },
    ];
    // Same size for all: pad a managed resource of each to the largest (serials keep 4 digits).
    const body = (kind, k, pad = 0) =>
      tfstate({
        lineage: `lineage-${kind.unit}`,
        serial: 1000 + k,
        outputs: { url: `https://${kind.unit}`, revision: k % 2 === 0 ? 'even' : 'odd' },
        remotes: kind.remotes(k),
        managed: 4,
        pad: 1 + pad,
      });
    const size = Math.max(...kinds.flatMap((kind) => [0, 1].map((k) => body(kind, k).length)));
    for (const kind of kinds) {
      kind.ms = [];
      kind.pads = [0, 1].map((k) => size - body(kind, k).length);
    }
    const WARM = 3;
    for (let k = 0; k < WARM + WRITE_RUNS; k++) {
      for (const kind of kinds) {
        const b = body(kind, k, kind.pads[k % 2]);
        if (b.length !== size) throw new Error(`padding: ${b.length} != ${size}`);
        const r = await write(kind.unit, b);
        const v = JSON.parse(r.body.toString('utf8'));
        if (!v.created) throw new Error(`write ${k} of ${kind.unit} created no version`);
        if (k >= WARM) kind.ms.push(r.ms);
      }
    }
    for (const kind of kinds) {
      const s = JSON.parse(
        (await api.ok('GET', `/v1/units/${encodeURIComponent(kind.unit)}/status`)).body,
      );
      if (s.inputs.length !== kind.edges) {
        throw new Error(`${kind.unit} has ${s.inputs.length} inputs, expected ${kind.edges}`);
      }
      result.writes.push({ label: kind.label, bytes: size, ...stats(kind.ms) });
    }
    progress(`${db}: writes done`);
    result.peakRssMiB = server.peakRssMiB();
    result.rssMiB = server.rssMiB();
  } finally {
    api.close();
    await server.stop();
  }
  return result;
}

/**
 * PostgreSQL only: when (seconds after the server started) autovacuum last analysed the tables
 * the graph reads — a freshly loaded table has no statistics until then (PGlite never runs
 * autovacuum, so the embedded database never gets any).
 */
async function lastAnalysed(startedAt) {
  return withPg(async (c) => {
    const { rows } = await c.query(
      `SELECT relname, greatest(last_analyze, last_autoanalyze) AS at
         FROM pg_stat_user_tables
        WHERE relname IN ('units', 'states', 'versions', 'graph_edges') ORDER BY relname`,
    );
    return rows.map((r) => ({
      table: r.relname,
      after: r.at ? (new Date(r.at).getTime() - startedAt) / 1000 : null,
    }));
  });
}

/** A statement on DATABASE_URL (the server's PostgreSQL), outside the server. */
async function withPg(fn) {
  const { Client } = require('pg');
  const c = new Client({ connectionString: process.env.DATABASE_URL });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

// ------------------------------------------------------------------ tables

function tables(results) {
  const out = [];
  const line = (s) => out.push(s);
  const dbName = (db) => (db === 'postgres' ? 'PostgreSQL' : 'embedded (PGlite)');
  line(`\n## Set-up (states written through the HTTP backend, ${LOAD_IN_FLIGHT} in flight)`);
  line(
    '| database | units | discovered edges | most inputs of one state | load time | states/s | write p50 / p90 / max ms | producers changed | red / yellow (of consumers) |',
  );
  line('|---|---|---|---|---|---|---|---|---|');
  for (const r of results) {
    const s = r.setup;
    line(
      `| ${dbName(r.db)} | ${fmt(s.units)} | ${fmt(s.edges)} | ${s.maxIn} | ${fmt(s.loadSeconds, 1)} s | ${fmt(s.units / s.loadSeconds)} | ${fmt(s.loadStats.p50, 1)} / ${fmt(s.loadStats.p90, 1)} / ${fmt(s.loadStats.max, 1)} | ${s.changed} (${fmt(s.changeSeconds, 1)} s) | ${s.expected.red} / ${s.expected.yellow} (of ${fmt(s.consumers)}: ${fmt((100 * s.expected.red) / s.consumers, 1)} % / ${fmt((100 * s.expected.yellow) / s.consumers, 1)} %) |`,
    );
  }
  for (const r of results) if (r.mismatch) line(`\n**${dbName(r.db)}: ${r.mismatch}**`);

  line(`\n## (a) reading the graph (sequential, keep-alive; after warm-up)`);
  line('| database | request | runs | p50 ms | p90 ms | max ms | mean ms | response | items |');
  line('|---|---|---|---|---|---|---|---|---|');
  for (const r of results) {
    for (const q of r.reads) {
      line(
        `| ${dbName(r.db)} | ${q.label} | ${q.n} | ${fmt(q.p50, 1)} | ${fmt(q.p90, 1)} | ${fmt(q.max, 1)} | ${fmt(q.mean, 1)} | ${fmt(q.bytes / 1024, 0)} KiB | ${q.items} |`,
      );
    }
  }

  line('\nEach run in order (ms), and when it ended (seconds after the server started):');
  for (const r of results) {
    for (const q of r.reads) {
      line(
        `- ${dbName(r.db)}, ${q.label.split(' (')[0]}: ${q.series.join(', ')} (ended at ${fmt((q.at - r.startedAt) / 1000)} s)`,
      );
    }
    if (r.analysed) {
      line(
        `- ${dbName(r.db)}: before the explicit ANALYZE, autovacuum had last analysed ${r.analysed.map((a) => `${a.table} ${a.after === null ? 'never' : `${fmt(a.after)} s`}`).join(', ')}`,
      );
    }
  }

  const w = results[0]?.writes[0];
  line(
    `\n## (b) one state write, ${w ? fmt(w.bytes) : '?'} bytes each, through the HTTP backend (sequential; the kinds alternate; each write a new version)`,
  );
  line('| database | state | runs | p50 ms | p90 ms | max ms | mean ms | Δ p50 vs baseline |');
  line('|---|---|---|---|---|---|---|---|');
  for (const r of results) {
    const base = r.writes[0];
    for (const x of r.writes) {
      const d = x === base ? '—' : `${x.p50 - base.p50 >= 0 ? '+' : ''}${fmt(x.p50 - base.p50, 2)}`;
      line(
        `| ${dbName(r.db)} | ${x.label} | ${x.n} | ${fmt(x.p50, 2)} | ${fmt(x.p90, 2)} | ${fmt(x.max, 2)} | ${fmt(x.mean, 2)} | ${d} |`,
      );
    }
  }

  line('\n## Server memory (/proc/<pid>/status)');
  line(
    '| database | peak RSS at start | peak RSS after set-up | peak RSS after the runs | RSS at the end |',
  );
  line('|---|---|---|---|---|');
  for (const r of results) {
    line(
      `| ${dbName(r.db)} | ${fmt(r.idleRssMiB)} MiB | ${fmt(r.loadedRssMiB)} MiB | ${fmt(r.peakRssMiB)} MiB | ${fmt(r.rssMiB)} MiB |`,
    );
  }
  return out;
}

// ------------------------------------------------------------------ run

/** This script again, --only=postgres, under scripts/with-postgres.sh (its own process group). */
function runPostgres() {
  const self = fileURLToPath(import.meta.url);
  const argv = [self, '--only=postgres', ...(quick ? ['--quick'] : [])];
  const [cmd, cmdArgs] = process.env.DATABASE_URL
    ? [process.execPath, argv]
    : [join(root, 'scripts/with-postgres.sh'), [process.execPath, ...argv]];
  return new Promise((resolve, reject) => {
    const proc = spawn(cmd, cmdArgs, { stdio: ['ignore', 'pipe', 'inherit'], detached: true });
    proc.groupLeader = true;
    children.add(proc);
    let out = '';
    proc.stdout.on('data', (d) => (out += d));
    proc.once('error', reject);
    proc.once('exit', (code, signal) => {
      children.delete(proc);
      const mark = out.split('\n').find((l) => l.startsWith(RESULT_MARK));
      if (code === 0 && mark) resolve(JSON.parse(mark.slice(RESULT_MARK.length)));
      else reject(new Error(`exited with ${signal ?? code}`));
    });
  });
}

console.log(
  `Statehouse dependency-graph benchmarks — node ${process.version}, ${new Date().toISOString()}${quick ? ' (quick: a smaller graph, fewer runs)' : ''}`,
);

let failed = false;
try {
  const results = [];
  if (only === 'postgres') {
    if (!process.env.DATABASE_URL) throw new Error('--only=postgres needs DATABASE_URL');
    results.push(await benchDatabase('postgres'));
  } else {
    results.push(await benchDatabase('embedded'));
  }
  if (!only) {
    try {
      results.push(await runPostgres());
    } catch (e) {
      console.log(`\nPostgreSQL benchmark could not run: ${e.message.split('\n')[0]}`);
    }
  }
  for (const l of tables(results)) console.log(l);
  if (only === 'postgres') console.log(`${RESULT_MARK}${JSON.stringify(results[0])}`);
} catch (e) {
  failed = true;
  console.error(e);
} finally {
  await cleanupAll();
}
process.exit(failed ? 1 : 0);
