// `node scripts/bench-s3.mjs [--quick]`: the figures of the S3-compatible door, in one run,
// against the real server process (dist/src/cli/main.js serve) with load from a separate process
// (scripts/bench-s3-load.mjs):
//
//  1. through /s3 with full SigV4 + session-token verification (credentials from
//     POST /v1/auth/issue-s3-creds): GetObject of a 1 MiB state, PutObject of a 1 MiB and of a
//     50 MiB state — requests/s, MB/s, p50/p99, non-2xx, server peak RSS (VmHWM) and idle RSS;
//  2. the same transfers (same signed requests, same bytes) against scripts/bench-bare.mjs, a
//     bare Node http server that streams bodies to and from files with no checks: the ceiling;
//  3. Terraform `plan` wall time on a 200-resource state (200 `terraform_data` resources,
//     applied once), 3 runs with the `local` backend and 3 with `backend "s3"` against the
//     server (credential_process = `statehouse creds --json`, use_lockfile = true).
//
// Everything listens on and talks to 127.0.0.1 only. Every process started here is stopped
// and every temporary directory removed, on success, failure or Ctrl-C.
import { spawn } from 'node:child_process';
import {
  accessSync,
  constants as fsConstants,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import {
  buildIfStale,
  CLI,
  HOST,
  MiB,
  median,
  quick,
  readyUrl,
  root,
  serverEnv,
  TOKEN,
} from './lib/bench-common.mjs';

const NODE = process.execPath;
const SECONDS = quick ? 4 : 10;
const PLAN_RUNS = 3;
const RESOURCES = 200;

// ------------------------------------------------------------------ process and dir bookkeeping

const children = new Set();
const tempDirs = new Set();

function track(proc) {
  children.add(proc);
  proc.once('exit', () => children.delete(proc));
  return proc;
}

function tempDir(tag) {
  const d = mkdtempSync(join(tmpdir(), `statehouse-bench-s3-${tag}-`));
  tempDirs.add(d);
  return d;
}

function removeDir(d) {
  rmSync(d, { recursive: true, force: true });
  tempDirs.delete(d);
}

/** Last resort (synchronous): kill what is still running, remove what is still there. */
function cleanupNow() {
  for (const p of children) {
    if (p.exitCode === null && p.signalCode === null) {
      try {
        p.kill('SIGKILL');
      } catch {
        /* already gone */
      }
    }
  }
  for (const d of tempDirs) rmSync(d, { recursive: true, force: true });
}
process.on('exit', cleanupNow);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => {
    process.stderr.write(`\nbench-s3: ${sig}, stopping what it started\n`);
    process.exit(130);
  });
}

function stopProc(proc, timeoutMs = 10_000) {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
  return new Promise((res) => {
    const t = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
    proc.once('exit', () => {
      clearTimeout(t);
      res();
    });
    proc.kill('SIGTERM');
  });
}

function rssOf(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name) => Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(status)?.[1] ?? NaN);
  return { peakMiB: kb('VmHWM') / 1024, rssMiB: kb('VmRSS') / 1024 };
}

/** Runs a command to completion (async, so signals still reach our handlers). */
function run(cmd, argv, { env, cwd, timeoutMs = 600_000 } = {}) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const proc = track(spawn(cmd, argv, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] }));
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (d) => (stdout += d));
    proc.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
    proc.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    proc.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, ms: performance.now() - t0 });
    });
  });
}

// ------------------------------------------------------------------ servers

async function startStatehouse(dataDir) {
  const proc = track(
    spawn(NODE, [CLI, 'serve'], {
      // Long enough for a full run: the door refuses expired session tokens.
      env: serverEnv({ STATEHOUSE_STS_TTL: '1h', STATEHOUSE_DATA_DIR: dataDir }),
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  const { url, log } = await readyUrl(proc);
  return { url, s3: `${url}/s3`, proc, log, stop: () => stopProc(proc) };
}

/** Starts on a new data dir, stops, starts again: numbers are for an existing data dir. */
async function startStatehouseWarm(dataDir) {
  await (await startStatehouse(dataDir)).stop();
  return startStatehouse(dataDir);
}

async function startBare(dir) {
  const proc = track(
    spawn(NODE, [join(root, 'scripts/bench-bare.mjs'), dir], {
      env: { ...process.env, PORT: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  let out = '';
  proc.stderr.on('data', (d) => (out += d));
  const port = await new Promise((resolve, reject) => {
    let buf = '';
    proc.stdout.on('data', (d) => {
      buf += d;
      const m = /\{"port":(\d+)\}/.exec(buf);
      if (m) resolve(Number(m[1]));
    });
    proc.once('exit', (code) => reject(new Error(`bench-bare exited (${code}): ${out}`)));
  });
  const url = `http://${HOST}:${port}`;
  return { url, s3: `${url}/s3`, proc, log: () => out, stop: () => stopProc(proc) };
}

/** An API token of svc:bench (bootstrap-admin mints no S3 credentials). */
async function pipelineToken(url) {
  const r = await fetch(`${url}/v1/auth/tokens`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: `bench ${Date.now()}`, subject: 'svc:bench' }),
  });
  const text = await r.text();
  if (r.status !== 201) throw new Error(`creating an API token answered ${r.status}: ${text}`);
  return JSON.parse(text).token;
}

async function issueCreds(url) {
  const r = await fetch(`${url}/v1/auth/issue-s3-creds`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${await pipelineToken(url)}` },
  });
  const text = await r.text();
  if (r.status !== 200) throw new Error(`issue-s3-creds answered ${r.status}: ${text}`);
  return JSON.parse(text);
}

async function load(scenario, s3Url, concurrency, size, creds) {
  const r = await run(
    NODE,
    [
      join(root, 'scripts/bench-s3-load.mjs'),
      scenario,
      s3Url,
      String(concurrency),
      String(SECONDS),
      String(size),
    ],
    {
      env: {
        ...process.env,
        BENCH_S3_ACCESS_KEY_ID: creds.AccessKeyId,
        BENCH_S3_SECRET_ACCESS_KEY: creds.SecretAccessKey,
        BENCH_S3_SESSION_TOKEN: creds.SessionToken,
      },
      timeoutMs: (SECONDS + 300) * 1000,
    },
  );
  if (r.code !== 0) {
    throw new Error(`bench-s3-load ${scenario} failed (${r.code ?? r.signal}): ${r.stderr}`);
  }
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

// ------------------------------------------------------------------ report

const notes = [];
const fmt = (n, d = 0) => (Number.isFinite(n) ? n.toFixed(d) : 'n/a');

function transferRow(target, r, rss, idle) {
  const non2xx = Object.entries(r.statuses ?? {})
    .filter(([s]) => !/^2\d\d$/.test(s))
    .reduce((n, [, c]) => n + c, 0);
  const short = r.other - non2xx; // 2xx answers that were not the expected bytes
  return (
    `| ${target} | ${r.concurrency} | ${r.perSecond} | ${r.mbPerSecond} | ${r.p50ms} | ${r.p99ms} | ` +
    `${non2xx}${short > 0 ? ` (+${short} short)` : ''} | ${fmt(rss.peakMiB)} MiB | ${fmt(idle.rssMiB)} MiB (HWM ${fmt(idle.peakMiB)}) |`
  );
}

function noteErrors(label, r) {
  if (r.seedFailed) notes.push(`${label}: seeding the state to read failed`);
  for (const e of r.errors ?? []) {
    notes.push(`${label}: ${e.status} — ${e.body.replace(/\s+/g, ' ').trim() || '(empty body)'}`);
  }
}

// ------------------------------------------------------------------ 1 + 2: transfers

const TRANSFERS = [
  { title: 'GetObject, 1 MiB state', op: 'get', size: 1 * MiB, conc: 8 },
  { title: 'PutObject, 1 MiB state', op: 'put', size: 1 * MiB, conc: 8 },
  { title: 'PutObject, 50 MiB state', op: 'put', size: 50 * MiB, conc: 2 },
];

/**
 * One server per state size (a fresh process, so each peak RSS is that size's): the 1 MiB
 * server takes the PUT run, then the GET run; the 50 MiB server the PUT run.
 */
async function transfers(kind) {
  const results = {};
  for (const size of [...new Set(TRANSFERS.map((t) => t.size))]) {
    const dir = tempDir(kind);
    let s;
    try {
      let creds;
      if (kind === 's3') {
        s = await startStatehouseWarm(dir);
        creds = await issueCreds(s.url);
      } else {
        s = await startBare(dir);
        // The bare server checks nothing, but it gets the same signed requests (same bytes).
        creds = {
          AccessKeyId: 'SHBAREBENCHKEY000000',
          SecretAccessKey: 'bare-secret',
          SessionToken: 'bare.session.token',
        };
      }
      const idle = rssOf(s.proc.pid);
      const ordered = TRANSFERS.filter((t) => t.size === size).sort((a, b) =>
        a.op === b.op ? 0 : a.op === 'put' ? -1 : 1,
      );
      for (const t of ordered) {
        const r = await load(t.op, s.s3, t.conc, t.size, creds);
        results[t.title] = { r, rss: rssOf(s.proc.pid), idle };
        process.stderr.write(
          `  ${kind} ${t.title}: ${r.perSecond} req/s, ${r.mbPerSecond} MB/s, ${r.other} failed\n`,
        );
      }
    } catch (e) {
      if (s) notes.push(`${kind} server output (tail):\n${s.log().slice(-4000)}`);
      throw e;
    } finally {
      if (s) await s.stop();
      removeDir(dir);
    }
  }
  return results;
}

// ------------------------------------------------------------------ 3: terraform plan

function which(cmd) {
  for (const d of (process.env.PATH ?? '').split(delimiter)) {
    const p = join(d, cmd);
    try {
      accessSync(p, fsConstants.X_OK);
      return p;
    } catch {
      /* next */
    }
  }
  return undefined;
}

function mainTf(backendBlock) {
  const lines = ['terraform {', backendBlock, '}', ''];
  for (let i = 0; i < RESOURCES; i++) {
    lines.push(
      `resource "terraform_data" "r${String(i).padStart(3, '0')}" {`,
      `  input = "resource-${i}-${'x'.repeat(200)}"`,
      '}',
      '',
    );
  }
  return lines.join('\n');
}

async function terraformPlans(terraform) {
  const scratch = tempDir('tf');
  let s;
  try {
    const dataDir = join(scratch, 'data');
    s = await startStatehouseWarm(dataDir);
    const home = join(scratch, 'home');
    mkdirSync(home);
    const cliConfig = join(scratch, 'terraformrc');
    writeFileSync(cliConfig, '');
    const awsConfig = join(scratch, 'aws-config');
    writeFileSync(
      awsConfig,
      [
        '[profile statehouse]',
        'region = us-east-1',
        `credential_process = "${NODE}" "${CLI}" creds --json --server ${s.url}`,
        '',
      ].join('\n'),
    );
    const awsCredentials = join(scratch, 'aws-credentials');
    writeFileSync(awsCredentials, '');

    const env = {};
    for (const [k, v] of Object.entries(process.env)) {
      if (/^(TF_|AWS_|STATEHOUSE_)/.test(k) || /_proxy$/i.test(k) || k === 'DATABASE_URL') continue;
      env[k] = v;
    }
    Object.assign(env, {
      HOME: home,
      XDG_CONFIG_HOME: join(home, '.config'),
      TF_CLI_CONFIG_FILE: cliConfig,
      TF_IN_AUTOMATION: '1',
      CHECKPOINT_DISABLE: '1',
      AWS_CONFIG_FILE: awsConfig,
      AWS_SHARED_CREDENTIALS_FILE: awsCredentials,
      AWS_EC2_METADATA_DISABLED: 'true',
      NO_PROXY: '127.0.0.1,localhost',
      no_proxy: '127.0.0.1,localhost',
      STATEHOUSE_TOKEN: await pipelineToken(s.url),
    });

    const backends = {
      local: '  backend "local" {}',
      s3: [
        '  backend "s3" {',
        '    bucket         = "tfstate"',
        '    key            = "bench/plan/terraform.tfstate"',
        '    region         = "us-east-1"',
        '    profile        = "statehouse"',
        '    use_lockfile   = true',
        `    endpoints      = { s3 = "${s.url}/s3" }`,
        '    use_path_style = true',
        '    skip_credentials_validation = true',
        '    skip_requesting_account_id  = true',
        '    skip_region_validation      = true',
        '    skip_metadata_api_check     = true',
        '  }',
      ].join('\n'),
    };
    const tf = async (cwd, argv, what) => {
      const r = await run(terraform, argv, { env, cwd, timeoutMs: 600_000 });
      if (r.code !== 0) {
        throw new Error(
          `terraform ${what} failed (${r.code ?? r.signal}):\n${r.stdout.slice(-3000)}\n${r.stderr.slice(-3000)}\n--- server output (tail) ---\n${s.log().slice(-3000)}`,
        );
      }
      return r;
    };

    const out = {};
    for (const [name, block] of Object.entries(backends)) {
      const work = join(scratch, name);
      mkdirSync(work);
      writeFileSync(join(work, 'main.tf'), mainTf(block));
      await tf(work, ['init', '-input=false', '-no-color'], `init (${name})`);
      const apply = await tf(
        work,
        ['apply', '-auto-approve', '-input=false', '-no-color'],
        `apply (${name})`,
      );
      if (!new RegExp(`${RESOURCES} added`).test(apply.stdout)) {
        notes.push(`terraform apply (${name}) did not report ${RESOURCES} added`);
      }
      const plans = [];
      for (let i = 0; i < PLAN_RUNS; i++) {
        const r = await tf(work, ['plan', '-input=false', '-no-color'], `plan (${name})`);
        if (!/No changes\./.test(r.stdout))
          notes.push(`terraform plan (${name}) run ${i + 1} did not say "No changes."`);
        plans.push(r.ms);
      }
      out[name] = { plans, apply: apply.ms };
    }
    // What Terraform's credential_process costs (one node start + one HTTPS-less API call).
    const credsRuns = [];
    for (let i = 0; i < PLAN_RUNS; i++) {
      const r = await run(NODE, [CLI, 'creds', '--json', '--server', s.url], { env });
      if (r.code !== 0) throw new Error(`statehouse creds --json failed: ${r.stderr}`);
      credsRuns.push(r.ms);
    }
    const stateBytes = Number(
      (
        await fetch(`${s.url}/v1/backend/bench/plan`, {
          headers: { Authorization: `Bearer ${TOKEN}` },
        })
          .then((r) => r.arrayBuffer())
          .catch(() => new ArrayBuffer(0))
      ).byteLength,
    );
    out.credsRuns = credsRuns;
    out.stateBytes = stateBytes;
    return out;
  } finally {
    if (s) await s.stop();
    removeDir(scratch);
  }
}

// ------------------------------------------------------------------ main

async function main() {
  try {
    if (buildIfStale()) process.stderr.write('bench-s3: dist/ was rebuilt from src/\n');
  } catch (e) {
    process.stderr.write(
      `bench-s3: could not rebuild dist/ (${e.message.split('\n')[0]}); using the dist/ that is there\n`,
    );
    notes.push('dist/ could not be rebuilt from src/: the server measured is the existing dist/');
  }
  const terraform = which('terraform');
  const tfVersion = terraform
    ? (
        await run(terraform, ['version'], { env: { ...process.env, CHECKPOINT_DISABLE: '1' } })
      ).stdout.split('\n')[0]
    : 'terraform not found';
  console.log(
    `# Statehouse S3 door benchmark — node ${process.version}, ${tfVersion}, ${new Date().toISOString()}${quick ? ' (quick)' : ''}`,
  );
  console.log(
    `\nLoad: scripts/bench-s3-load.mjs (own process, keep-alive), ${SECONDS} s per row; MB = 10^6 bytes.`,
  );

  process.stderr.write('bench-s3: transfers through /s3\n');
  const s3 = await transfers('s3');
  process.stderr.write('bench-s3: transfers through the bare server\n');
  const bare = await transfers('bare');

  for (const t of TRANSFERS) {
    const a = s3[t.title];
    const b = bare[t.title];
    console.log(`\n## ${t.title}`);
    console.log(
      '| target | clients | req/s | MB/s | p50 ms | p99 ms | non-2xx | server peak RSS | idle RSS (before load) |',
    );
    console.log('|---|---|---|---|---|---|---|---|---|');
    console.log(transferRow('/s3 (SigV4 + session token, full verification)', a.r, a.rss, a.idle));
    console.log(transferRow('bare Node http (ceiling)', b.r, b.rss, b.idle));
    const pct = b.r.perSecond > 0 ? (100 * a.r.perSecond) / b.r.perSecond : NaN;
    console.log(`\n/s3 reaches ${fmt(pct)} % of the ceiling's requests/s.`);
    if (t.op === 'get') {
      console.log(
        'Peak RSS is VmHWM after the run; this GET run follows the 1 MiB PUT run on the same server process.',
      );
    }
    noteErrors(`/s3 ${t.title}`, a.r);
    noteErrors(`bare ${t.title}`, b.r);
    if (t.op === 'put') {
      console.log(
        `Client SHA-256 of the PUT bodies (in the wall clock, outside p50/p99): ${a.r.clientHashMs} ms over the /s3 run, ${b.r.clientHashMs} ms over the bare run.`,
      );
    }
  }

  if (!terraform) {
    console.log('\n## Terraform plan\nterraform is not on the PATH: not measured.');
  } else {
    process.stderr.write('bench-s3: terraform plan, local and s3 backends\n');
    const tf = await terraformPlans(terraform);
    console.log(
      `\n## Terraform plan, ${RESOURCES} terraform_data resources (state ${fmt(tf.stateBytes / 1024)} KiB), wall time`,
    );
    console.log('| backend | run 1 s | run 2 s | run 3 s | median s | apply (once) s |');
    console.log('|---|---|---|---|---|---|');
    for (const [name, label] of [
      ['local', '`local`'],
      ['s3', '`s3` → /s3 (credential_process, use_lockfile)'],
    ]) {
      const r = tf[name];
      console.log(
        `| ${label} | ${r.plans.map((ms) => fmt(ms / 1000, 2)).join(' | ')} | ${fmt(median(r.plans) / 1000, 2)} | ${fmt(r.apply / 1000, 2)} |`,
      );
    }
    console.log(
      `\n\`statehouse creds --json\` alone (what credential_process runs once per plan): ${tf.credsRuns.map((ms) => `${fmt(ms / 1000, 2)} s`).join(', ')}.`,
    );
  }

  if (notes.length) {
    console.log('\n## Notes');
    for (const n of notes) console.log(`- ${n}`);
  }
}

try {
  await main();
} catch (e) {
  console.error(`bench-s3 failed: ${e.stack ?? e}`);
  if (notes.length) console.error(notes.join('\n'));
  process.exitCode = 1;
} finally {
  await Promise.all([...children].map((p) => stopProc(p)));
  for (const d of [...tempDirs]) removeDir(d);
}
