// What the bench scripts (scripts/bench*.mjs, scripts/fixtures.mjs) share: where the compiled
// server is, their options, the environment and the start, readiness and stop of a server
// process, /proc readings, one keep-alive HTTP exchange, and the load generators' state template
// and run loop. Importing this module has no side effect: a script that needs dist/ calls
// buildIfStale() itself.
import { createServer } from 'node:net';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const require = createRequire(import.meta.url);
/** The `statehouse` command of the compiled server. */
export const CLI = join(root, 'dist/src/cli/main.js');
/** The bootstrap token of every server a bench script starts. */
export const TOKEN = 'bench-bootstrap-token-0123456789abcdefghij';
export const HOST = '127.0.0.1';
export const MiB = 1024 * 1024;

/** Builds dist/ when it is older than the sources (scripts/build-if-stale.js); true if it did. */
export function buildIfStale() {
  return require('../build-if-stale.js').buildIfStale();
}

/** A module of the compiled server, by its path under dist/src. */
export const dist = (path) => require(join(root, 'dist/src', path));

// ------------------------------------------------------------------ options

export const args = process.argv.slice(2);
/** `--quick`: shorter runs. */
export const quick = args.includes('--quick');
/** `--only=<part>`: run one part. */
export const only = args.find((a) => a.startsWith('--only='))?.slice(7);

/** The text given as `--name=text` on the command line, or `fallback`. */
export const textArg = (name, fallback) =>
  args.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback;

/** The number given as `--name=N` on the command line, or `fallback`. */
export const numberArg = (name, fallback) => Number(textArg(name, fallback));

/** The median of a list of numbers (the mean of the middle two for an even count). */
export const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

// ------------------------------------------------------------------ processes

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The caller's environment without any STATEHOUSE_* setting and without DATABASE_URL. */
export function baseEnv() {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('STATEHOUSE_')) env[k] = v;
  delete env.DATABASE_URL;
  return env;
}

/** The environment of a benchmarked `statehouse serve` on 127.0.0.1, with `extra` on top. */
export function serverEnv(extra = {}) {
  return {
    ...baseEnv(),
    NODE_ENV: 'production',
    PORT: '0',
    STATEHOUSE_HOST: HOST,
    STATEHOUSE_BOOTSTRAP_TOKEN: TOKEN,
    STATEHOUSE_LOG_LEVEL: 'warn',
    ...extra,
  };
}

/** A TCP port free on 127.0.0.1 right now. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, HOST, () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/**
 * Collects a child's stdout and stderr; returns a reader of what was collected. With `max`, only
 * a tail is kept (for error messages): at most `max` characters, cut to half when exceeded.
 */
export function captureOutput(proc, max = Infinity) {
  let out = '';
  const keep = (d) => {
    out += d;
    if (out.length > max) out = out.slice(-max / 2);
  };
  proc.stdout.on('data', keep);
  proc.stderr.on('data', keep);
  return () => out;
}

/** The port of a server started with PORT=0, from its "listening on" line (logged at info). */
export async function portFromLog(proc, log, deadline) {
  for (;;) {
    const m = /listening on https?:\/\/[^:\s]+:(\d+)/.exec(log());
    if (m) return Number(m[1]);
    if (proc.exitCode !== null) throw new Error(`server exited: ${log()}`);
    if (Date.now() > deadline) throw new Error(`server did not start: ${log()}`);
    await sleep(20);
  }
}

/** The port a server listens on, from /proc (for a server that does not log it). */
export async function portFromProc(proc, log, deadline, interval = 20) {
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`server exited (${proc.exitCode}): ${log()}`);
    if (Date.now() > deadline) throw new Error(`server did not listen in time: ${log()}`);
    const port = listeningPort(proc.pid);
    if (port) return port;
    await sleep(interval);
  }
}

/** Waits for 200 from `${url}/readyz`; fails when the process exits or the deadline passes. */
export async function waitReady(url, proc, log, deadline, interval = 20) {
  for (;;) {
    const r = await fetch(`${url}/readyz`).catch(() => undefined);
    if (r?.status === 200) return;
    if (proc.exitCode !== null) throw new Error(`server exited: ${log()}`);
    if (Date.now() > deadline) throw new Error(`server never became ready: ${log()}`);
    await sleep(interval);
  }
}

/** A server started with PORT=0 that logs at info: its port and URL once /readyz answers. */
export async function readyFromLog(proc, log) {
  const deadline = Date.now() + 120_000;
  const port = await portFromLog(proc, log, deadline);
  const url = `http://${HOST}:${port}`;
  await waitReady(url, proc, log, deadline);
  return { port, url };
}

/** Waits (up to 2 minutes) for a just-spawned server to listen and answer /readyz. */
export async function readyUrl(proc, maxLog = 64 * 1024) {
  const log = captureOutput(proc, maxLog);
  const deadline = Date.now() + 120_000;
  const url = `http://${HOST}:${await portFromProc(proc, log, deadline)}`;
  await waitReady(url, proc, log, deadline);
  return { url, log };
}

/**
 * A pipeline's API token (svc:bench, made with the bootstrap token) and the S3 credentials it is
 * issued, from a server at `url`.
 */
export async function pipelineCredentials(url) {
  const post = async (path, bearer, body) => {
    const r = await fetch(`${url}${path}`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
      body: body && JSON.stringify(body),
    });
    if (!r.ok) throw new Error(`POST ${url}${path} answered ${r.status}: ${await r.text()}`);
    return r.json();
  };
  const { token } = await post('/v1/auth/tokens', TOKEN, { name: 'bench', subject: 'svc:bench' });
  const c = await post('/v1/auth/issue-s3-creds', token);
  return {
    token,
    creds: {
      accessKeyId: c.AccessKeyId,
      secretAccessKey: c.SecretAccessKey,
      sessionToken: c.SessionToken,
    },
  };
}

/** On SIGINT or SIGTERM: `cleanup()`, then exit 130. */
export function onStopSignal(cleanup) {
  for (const sig of ['SIGINT', 'SIGTERM']) {
    process.once(sig, () => void cleanup().then(() => process.exit(130)));
  }
}

/** SIGTERM, and resolves once the process has exited (at once when it already has). */
export async function stopProcess(proc) {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise((r) => proc.once('exit', r));
  proc.kill('SIGTERM');
  await exited;
}

/** A field of /proc/<pid>/status in MiB (VmRSS, VmHWM …); NaN when the process is gone. */
export function procStatusMiB(pid, field) {
  try {
    const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(
      readFileSync(`/proc/${pid}/status`, 'utf8'),
    );
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

/** The TCP port a process listens on, read from /proc (Linux). */
export function listeningPort(pid) {
  let inodes;
  try {
    inodes = new Set();
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        const m = /socket:\[(\d+)\]/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (m) inodes.add(m[1]);
      } catch {
        /* fd closed meanwhile */
      }
    }
  } catch {
    return undefined;
  }
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let lines = [];
    try {
      lines = readFileSync(file, 'utf8').split('\n').slice(1);
    } catch {
      continue;
    }
    for (const line of lines) {
      const f = line.trim().split(/\s+/);
      if (f[3] === '0A' && inodes.has(f[9])) return parseInt(f[1].split(':')[1], 16);
    }
  }
  return undefined;
}

// ------------------------------------------------------------------ HTTP

/**
 * One request over node:http (keep-alive `agent`); resolves with status, body and the ms elapsed
 * since `t0` (by default: since the request was made).
 */
export function exchange(agent, url, method, path, headers, body, t0 = performance.now()) {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: url.hostname, port: url.port, method, path, agent, headers },
      (res) => {
        const chunks = [];
        res.on('data', (d) => chunks.push(d));
        res.on('end', () =>
          resolve({
            status: res.statusCode,
            body: Buffer.concat(chunks),
            ms: performance.now() - t0,
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

// ------------------------------------------------------------------ load generators

/**
 * A Terraform v4 state of about `total` bytes (`terraform_data` resources) whose serial can be
 * rewritten in place: `setSerial(n)` changes the bytes of `buf`, nothing else.
 */
export function stateTemplate(total) {
  const head = '{\n  "version": 4,\n  "terraform_version": "1.11.4",\n  "serial": ';
  const serialSlot = ' '.repeat(16);
  const mid =
    ',\n  "lineage": "bench-lineage",\n  "outputs": {\n    "id": {\n      "value": "bench",\n      "type": "string"\n    }\n  },\n  "resources": [\n';
  const tail = '\n  ],\n  "check_results": null\n}\n';
  const resources = [];
  let used = head.length + serialSlot.length + mid.length + tail.length;
  for (let i = 0; used < total; i++) {
    const r = JSON.stringify(
      {
        mode: 'managed',
        type: 'terraform_data',
        name: `r${i}`,
        provider: 'provider["terraform.io/builtin/terraform"]',
        instances: [
          {
            schema_version: 0,
            attributes: {
              id: `00000000-0000-0000-0000-${String(i).padStart(12, '0')}`,
              input: { value: 'x'.repeat(700), type: 'string' },
              output: null,
              triggers_replace: null,
            },
            sensitive_attributes: [],
          },
        ],
      },
      null,
      2,
    ).replace(/^/gm, '    ');
    resources.push(r);
    used += r.length + 2;
  }
  const buf = Buffer.from(head + serialSlot + mid + resources.join(',\n') + tail);
  return {
    buf,
    setSerial(n) {
      buf.write(String(n).padEnd(16, ' '), head.length, 'latin1');
    },
  };
}

/**
 * `concurrency` workers calling `work(worker, i)` until `seconds` have passed. Each call answers
 * `{ ok, status, bytes, ms? }` (`ms`: its own latency, else the call's duration counts);
 * `onError` sees every answer that is not ok. Resolves with the counts, rates and p50/p99.
 */
export async function runWorkers({ concurrency, seconds, work, onError = () => undefined }) {
  const deadline = Date.now() + seconds * 1000;
  const latencies = [];
  let ok = 0;
  let other = 0;
  let bytes = 0;
  const statuses = {};
  const started = Date.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, w) => {
      let i = 0;
      while (Date.now() < deadline) {
        const t0 = performance.now();
        const r = await work(w, i++);
        latencies.push(r.ms ?? performance.now() - t0);
        statuses[r.status] = (statuses[r.status] ?? 0) + 1;
        if (r.ok) {
          ok++;
          bytes += r.bytes;
        } else {
          other++;
          onError(r);
        }
      }
    }),
  );
  const elapsed = (Date.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const pct = (p) =>
    latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))] ?? 0;
  return {
    seconds: Number(elapsed.toFixed(2)),
    ok,
    other,
    statuses,
    perSecond: Number((ok / elapsed).toFixed(1)),
    mbPerSecond: Number((bytes / elapsed / 1e6).toFixed(1)),
    p50ms: Number(pct(0.5).toFixed(1)),
    p99ms: Number(pct(0.99).toFixed(1)),
  };
}
