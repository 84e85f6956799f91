// `node scripts/bench-rbac.mjs [--quick] [--only=cached|embedded|postgres]`: the figures of the
// RBAC issue, for a principal with 50 rules.
//
//  1. cached decisions per second, in process: (a) `decide` of dist/src/rbac/policy.js over 50
//     compiled rules, and (b) the server's own path on a cache hit, AuthorizationService.explain
//     with the real RbacCache (key, cache lookup, decide, the outputs.read fallback);
//  2. uncached decisions per second, as the server decides on a cache miss (after an RBAC
//     change, and on PostgreSQL whenever the LISTEN connection is down):
//     AuthorizationService.explain with the real RbacRepository on a real database and a cache
//     that is off — the initialised-flag query, the rules query, compiling the 50 rules, decide —
//     sequentially and with 16 in flight; on the embedded database (PGlite over its socket, the
//     data dir the server left behind) and on PostgreSQL (a throwaway cluster via
//     scripts/with-postgres.sh unless DATABASE_URL is set);
//  3. the added latency of authorization on an S3 GetObject: a small state read through /s3
//     with SigV4 (header-signed with session token, like Terraform's S3 backend), a few hundred
//     sequential requests each, p50/p99, as svc:ops (the RBAC admin: before init no rules, after
//     it the admin role's one rule; bootstrap-admin mints no S3 credentials) and as a service
//     principal with 50 rules after `rbac init`; also the same service principal before init (no
//     rules either), as a second baseline. The two principals alternate in blocks, so drift on a
//     noisy machine hits both alike.
//
// Everything listens on and talks to 127.0.0.1 only; every process started is stopped and every
// temporary directory removed, on success, failure or Ctrl-C.
import { execFileSync, spawn } from 'node:child_process';
import { createHash, createHmac } from 'node:crypto';
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
  dist,
  exchange,
  freePort,
  HOST,
  only,
  onStopSignal,
  quick,
  require,
  root,
  sleep,
  stopProcess,
  TOKEN,
  waitReady,
} from './lib/bench-common.mjs';

buildIfStale();
require('reflect-metadata');
const CACHED_SECONDS = quick ? 1 : 3;
const UNCACHED_SECONDS = quick ? 2 : 5;
const GETS = quick ? 200 : 600; // per principal, after warm-up
const BLOCK = 50;
const SUBJECT = 'svc:bench';
const TARGET = 'team-39/app'; // the unit read through /s3: allowed by one of the 50 rules

// ------------------------------------------------------------------ bookkeeping

const children = new Set();
const tempDirs = new Set();
function tempDir(tag) {
  const d = mkdtempSync(join(tmpdir(), `statehouse-bench-rbac-${tag}-`));
  tempDirs.add(d);
  return d;
}
async function cleanupAll() {
  for (const p of children) {
    if (p.exitCode === null && p.signalCode === null) {
      const exited = new Promise((r) => p.once('exit', r));
      p.kill('SIGTERM');
      await Promise.race([exited, sleep(10_000).then(() => p.kill('SIGKILL'))]);
    }
  }
  for (const d of tempDirs) rmSync(d, { recursive: true, force: true });
}
onStopSignal(cleanupAll);

const report = [];
const line = (s) => {
  report.push(s);
  console.log(s);
};
const fmt = (n, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
function pct(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? NaN;
}

// ------------------------------------------------------------------ the 50 rules

/**
 * 50 rules in 5 permissions of 10, as a platform team would write them: 40 teams' own trees,
 * CI writing prod only in the prod workspace, shared outputs, and explicit denies.
 */
function permissions() {
  const perms = [];
  for (let p = 0; p < 4; p++) {
    const rules = [];
    for (let i = 0; i < 10; i++) {
      const t = String(p * 10 + i).padStart(2, '0');
      rules.push({
        effect: 'allow',
        actions: ['unit.read', 'unit.write', 'unit.lock', 'outputs.read', 'version.read'],
        resources: [`team-${t}/**`],
      });
    }
    perms.push({ name: `teams-${p}`, rules });
  }
  perms.push({
    name: 'shared-and-guards',
    rules: [
      {
        effect: 'allow',
        actions: ['unit.write', 'unit.lock'],
        resources: ['*/prod'],
        workspaces: ['prod'],
      },
      {
        effect: 'allow',
        actions: ['unit.write'],
        resources: ['ci/*/prod'],
        workspaces: ['prod', 'prod-*'],
      },
      { effect: 'allow', actions: ['outputs.read'], resources: ['shared/network', 'shared/dns'] },
      {
        effect: 'allow',
        actions: ['outputs.read', 'outputs.read-sensitive'],
        resources: ['shared/secrets/*'],
      },
      { effect: 'allow', actions: ['graph.read'], resources: ['**'] },
      { effect: 'allow', actions: ['version.read', 'version.restore'], resources: ['team-0*/**'] },
      { effect: 'allow', actions: ['unit.create'], resources: ['sandbox/**'] },
      { effect: 'deny', actions: ['unit.delete', 'unit.purge'], resources: ['**/prod'] },
      { effect: 'deny', actions: ['unit.write'], resources: ['legacy/**'] },
      { effect: 'deny', actions: ['unit.write', 'unit.lock'], resources: ['team-1*/frozen/**'] },
    ],
  });
  return perms;
}

/** A realistic mix of requests: about half allowed, some denied by a deny rule, most by none. */
function requests(n) {
  const actions = [
    'unit.read',
    'unit.read',
    'unit.write',
    'unit.lock',
    'outputs.read',
    'version.read',
    'unit.delete',
  ];
  const out = [];
  let seed = 42;
  const rnd = (k) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % k;
  };
  for (let i = 0; i < n; i++) {
    const action = actions[rnd(actions.length)];
    const kind = rnd(10);
    let unit;
    if (kind < 5)
      unit = `team-${String(rnd(40)).padStart(2, '0')}/svc-${rnd(20)}/${['dev', 'prod', 'frozen/x'][rnd(3)]}`;
    else if (kind < 8) unit = `other-${rnd(100)}/app/${['dev', 'prod'][rnd(2)]}`;
    else if (kind < 9) unit = `legacy/app-${rnd(10)}`;
    else unit = ['shared/network', 'shared/dns', 'shared/secrets/db'][rnd(3)];
    out.push({ action, resource: { unit, workspace: ['default', 'prod', 'dev'][rnd(3)] } });
  }
  return out;
}

/** The rules as the repository returns them (RuleRow), for an in-process "database". */
function ruleRows() {
  let id = 0;
  return permissions().flatMap((p) =>
    p.rules.map((r) => ({
      id: `00000000-0000-0000-0000-${String(++id).padStart(12, '0')}`,
      effect: r.effect,
      actions: r.actions,
      resources: r.resources,
      workspaces: r.workspaces ?? null,
      permission: p.name,
      role: 'bench',
    })),
  );
}

// ------------------------------------------------------------------ 1. cached

async function benchCached() {
  const { compileRule, decide } = dist('rbac/policy.js');
  const { AuthorizationService } = dist('rbac/authorization.service.js');
  const { RbacCache } = dist('rbac/rbac-cache.js');
  const rows = ruleRows();
  const compiled = rows.map((r) =>
    compileRule({ ...r, source: `role ${r.role} / permission ${r.permission}` }),
  );
  const mix = requests(4096);
  let allowed = 0;
  let byDeny = 0;
  for (const q of mix) {
    const d = decide(compiled, q.action, q.resource);
    if (d.allowed) allowed++;
    else if (d.rule) byDeny++;
  }

  // (a) decide alone.
  let n = 0;
  let sink = 0;
  for (let i = 0; i < 20_000; i++)
    sink += decide(compiled, mix[i & 4095].action, mix[i & 4095].resource).allowed ? 1 : 0; // warm-up
  let t0 = performance.now();
  const endA = t0 + CACHED_SECONDS * 1000;
  while (performance.now() < endA) {
    for (let i = 0; i < 4096; i++) {
      const q = mix[i];
      if (decide(compiled, q.action, q.resource).allowed) sink++;
    }
    n += 4096;
  }
  const decideRate = n / ((performance.now() - t0) / 1000);

  // (b) the server's path on a cache hit.
  let dbCalls = 0;
  const repo = {
    isInitialised: async () => (dbCalls++, true),
    rulesFor: async () => (dbCalls++, rows),
  };
  const cache = new RbacCache({ databaseUrl: undefined });
  const authz = new AuthorizationService(repo, cache, { record() {} });
  const principal = { subject: SUBJECT, kind: 'api-token', groups: [] };
  await authz.explain(principal, 'unit.read', { unit: TARGET, workspace: 'default' });
  const callsAfterFill = dbCalls;
  for (let i = 0; i < 20_000; i++)
    await authz.explain(principal, mix[i & 4095].action, mix[i & 4095].resource);
  n = 0;
  t0 = performance.now();
  const endB = t0 + CACHED_SECONDS * 1000;
  while (performance.now() < endB) {
    for (let i = 0; i < 4096; i++) {
      const q = mix[i];
      if ((await authz.explain(principal, q.action, q.resource)).allowed) sink++;
    }
    n += 4096;
  }
  const explainRate = n / ((performance.now() - t0) / 1000);
  if (dbCalls !== callsAfterFill) throw new Error('the cached path read the "database"');

  line('\n## 1. cached decisions, in process (50 rules, one principal)');
  line(
    `Request mix: ${mix.length} requests over 6 actions and ~1,000 units — ${((allowed / mix.length) * 100).toFixed(0)} % allowed, ${((byDeny / mix.length) * 100).toFixed(0)} % denied by a deny rule, the rest by no matching allow.`,
  );
  line('| path | decisions/s | µs/decision |');
  line('|---|---|---|');
  line(
    `| policy.decide over 50 compiled rules | ${fmt(decideRate)} | ${fmt(1e6 / decideRate, 2)} |`,
  );
  line(
    `| AuthorizationService.explain, cache hit (key + lookup + decide) | ${fmt(explainRate)} | ${fmt(1e6 / explainRate, 2)} |`,
  );
  return sink;
}

// ------------------------------------------------------------------ 2. uncached

/**
 * AuthorizationService.explain with the real repository on `dataSource` and the cache off, as
 * the server decides on a cache miss.
 */
async function benchUncached(label, dataSource, inFlight) {
  const { AuthorizationService } = dist('rbac/authorization.service.js');
  const { RbacRepository } = dist('rbac/rbac.repository.js');
  const { RbacCache } = dist('rbac/rbac-cache.js');
  const repo = new RbacRepository(dataSource);
  // A DATABASE_URL whose LISTEN connection is not up: `enabled` is false, nothing is cached.
  const cache = new RbacCache({ databaseUrl: { reveal: () => 'postgres://unused' } });
  if (cache.enabled) throw new Error('the cache should be off');
  const authz = new AuthorizationService(repo, cache, { record() {} });
  const principal = { subject: SUBJECT, kind: 'api-token', groups: [] };
  const rules = await repo.rulesFor(SUBJECT, undefined, []);
  if (rules.length !== 50) throw new Error(`expected 50 rules for ${SUBJECT}, got ${rules.length}`);
  const mix = requests(1024);
  for (let i = 0; i < 50; i++) await authz.explain(principal, mix[i].action, mix[i].resource);

  const rows = [];
  for (const conc of [1, inFlight]) {
    const latencies = [];
    let n = 0;
    const t0 = performance.now();
    const end = t0 + UNCACHED_SECONDS * 1000;
    await Promise.all(
      Array.from({ length: conc }, async (_, w) => {
        let i = w;
        while (performance.now() < end) {
          const q = mix[i++ & 1023];
          const s = performance.now();
          await authz.explain(principal, q.action, q.resource);
          latencies.push(performance.now() - s);
          n++;
        }
      }),
    );
    const rate = n / ((performance.now() - t0) / 1000);
    latencies.sort((a, b) => a - b);
    rows.push(
      `| ${label} | ${conc} | ${fmt(rate)} | ${fmt(pct(latencies, 0.5), 2)} | ${fmt(pct(latencies, 0.99), 2)} |`,
    );
  }
  // The rules query alone (what a cache miss adds over a hit, minus the flag query and compile).
  const q0 = performance.now();
  let q = 0;
  while (performance.now() < q0 + 1000) {
    await repo.rulesFor(SUBJECT, undefined, []);
    q++;
  }
  rows.push(
    `| ${label}: the rules query alone | 1 | ${fmt(q / ((performance.now() - q0) / 1000))} | ${fmt((performance.now() - q0) / q, 2)} (mean) | |`,
  );
  return rows;
}

// ------------------------------------------------------------------ servers and the API

async function startServer(extraEnv) {
  const port = await freePort();
  const proc = spawn(process.execPath, [CLI, 'serve'], {
    env: {
      ...baseEnv(),
      NODE_ENV: 'production',
      PORT: String(port),
      STATEHOUSE_HOST: HOST,
      STATEHOUSE_BOOTSTRAP_TOKEN: TOKEN,
      STATEHOUSE_LOG_LEVEL: 'warn',
      ...extraEnv,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(proc);
  proc.once('exit', () => children.delete(proc));
  const log = captureOutput(proc);
  const url = `http://${HOST}:${port}`;
  await waitReady(url, proc, log, Date.now() + 120_000, 50);
  return { url, log, stop: () => stopProcess(proc) };
}

async function api(url, token, method, path, body) {
  const r = await fetch(`${url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  if (r.status >= 300) throw new Error(`${method} ${path} answered ${r.status}: ${text}`);
  return text ? JSON.parse(text) : undefined;
}

/** The baseline: the RBAC admin (bootstrap-admin mints no S3 credentials). */
const BASELINE = 'svc:ops (admin)';

/** A service principal's token and S3 credentials, and the admin's S3 credentials. */
async function principals(url) {
  const svc = await api(url, TOKEN, 'POST', '/v1/auth/tokens', { name: 'bench', subject: SUBJECT });
  const ops = await api(url, TOKEN, 'POST', '/v1/auth/tokens', { name: 'ops', subject: 'svc:ops' });
  return {
    svcToken: svc.token,
    admin: await api(url, ops.token, 'POST', '/v1/auth/issue-s3-creds'),
    svc: await api(url, svc.token, 'POST', '/v1/auth/issue-s3-creds'),
  };
}

/** rbac init (admin: svc:ops), then 5 permissions of 10 rules in one role assigned to svc:bench. */
async function grantFiftyRules(url) {
  await api(url, TOKEN, 'POST', '/v1/rbac/init', { admin: { subject: 'svc:ops' } });
  const perms = permissions();
  for (const p of perms) await api(url, TOKEN, 'POST', '/v1/rbac/permissions', p);
  await api(url, TOKEN, 'POST', '/v1/rbac/roles', {
    name: 'bench',
    permissions: perms.map((p) => p.name),
  });
  await api(url, TOKEN, 'POST', '/v1/rbac/assignments', { role: 'bench', subject: SUBJECT });
  const t = await api(url, TOKEN, 'POST', '/v1/rbac/test', {
    subject: SUBJECT,
    action: 'unit.read',
    resource: { unit: TARGET, workspace: 'default' },
  });
  if (!t.allowed) throw new Error(`${SUBJECT} should read ${TARGET}: ${JSON.stringify(t)}`);
}

// ------------------------------------------------------------------ 3. S3 GetObject

// SigV4 header signing, copied from scripts/bench-s3-load.mjs (Node built-ins only).
const REGION = 'us-east-1';
const EMPTY_SHA256 = createHash('sha256').update('').digest('hex');
const sha256Hex = (data) => createHash('sha256').update(data).digest('hex');
const hmac = (key, data) => createHmac('sha256', key).update(data).digest();

function signer(creds, host) {
  let cache = { date: '', key: undefined };
  const signingKey = (date) => {
    if (cache.date !== date) {
      const kDate = hmac(`AWS4${creds.SecretAccessKey}`, date);
      const kRegion = hmac(kDate, REGION);
      const kService = hmac(kRegion, 's3');
      cache = { date, key: hmac(kService, 'aws4_request') };
    }
    return cache.key;
  };
  return (method, path, payloadHash) => {
    const amzDate = new Date()
      .toISOString()
      .replace(/[-:]/g, '')
      .replace(/\.\d{3}/, '');
    const date = amzDate.slice(0, 8);
    const scope = `${date}/${REGION}/s3/aws4_request`;
    const names = 'host;x-amz-content-sha256;x-amz-date;x-amz-security-token';
    const canonicalRequest = [
      method,
      path,
      '',
      `host:${host}\nx-amz-content-sha256:${payloadHash}\nx-amz-date:${amzDate}\nx-amz-security-token:${creds.SessionToken}\n`,
      names,
      payloadHash,
    ].join('\n');
    const stringToSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256Hex(canonicalRequest)].join(
      '\n',
    );
    const signature = createHmac('sha256', signingKey(date)).update(stringToSign).digest('hex');
    return {
      Host: host,
      'X-Amz-Content-Sha256': payloadHash,
      'X-Amz-Date': amzDate,
      'X-Amz-Security-Token': creds.SessionToken,
      Authorization: `AWS4-HMAC-SHA256 Credential=${creds.AccessKeyId}/${scope}, SignedHeaders=${names}, Signature=${signature}`,
    };
  };
}

function s3Client(baseUrl, creds) {
  const url = new URL(baseUrl);
  const sign = signer(creds, url.host);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const send = (method, path, body) => {
    const payloadHash = body ? sha256Hex(body) : EMPTY_SHA256;
    const t0 = performance.now(); // signing included
    const headers = sign(method, path, payloadHash);
    if (body) {
      headers['Content-Type'] = 'application/json';
      headers['Content-Length'] = String(body.length);
    }
    return exchange(agent, url, method, path, headers, body, t0);
  };
  return { send, close: () => agent.destroy() };
}

const statePath = `/s3/tfstate/${TARGET}/terraform.tfstate`;

function smallState() {
  return Buffer.from(
    `${JSON.stringify(
      {
        version: 4,
        terraform_version: '1.11.4',
        serial: 1,
        lineage: 'bench-rbac-lineage',
        outputs: { vpc_id: { value: 'vpc-0123456789abcdef0', type: 'string' } },
        resources: Array.from({ length: 5 }, (_, i) => ({
          mode: 'managed',
          type: 'terraform_data',
          name: `r${i}`,
          provider: 'provider["terraform.io/builtin/terraform"]',
          instances: [{ schema_version: 0, attributes: { id: `id-${i}`, input: null } }],
        })),
        check_results: null,
      },
      null,
      2,
    )}\n`,
  );
}

/**
 * GetObject of the small state, `GETS` times per principal after a warm-up, alternating the
 * principals in blocks of BLOCK so both see the same machine.
 */
async function getLatencies(url, named, expected) {
  const clients = Object.fromEntries(
    Object.entries(named).map(([k, creds]) => [k, s3Client(`${url}/s3`, creds)]),
  );
  const lat = Object.fromEntries(Object.keys(named).map((k) => [k, []]));
  try {
    for (const c of Object.values(clients)) {
      for (let i = 0; i < 100; i++) {
        const r = await c.send('GET', statePath);
        if (r.status !== 200) throw new Error(`warm-up GET answered ${r.status}: ${r.body}`);
      }
    }
    for (let done = 0; done < GETS; done += BLOCK) {
      for (const [k, c] of Object.entries(clients)) {
        for (let i = 0; i < BLOCK; i++) {
          const r = await c.send('GET', statePath);
          if (r.status !== 200 || !r.body.equals(expected)) {
            throw new Error(`GET as ${k} answered ${r.status}: ${r.body.toString().slice(0, 300)}`);
          }
          lat[k].push(r.ms);
        }
      }
    }
  } finally {
    for (const c of Object.values(clients)) c.close();
  }
  const stats = {};
  for (const [k, l] of Object.entries(lat)) {
    l.sort((a, b) => a - b);
    stats[k] = {
      n: l.length,
      p50: pct(l, 0.5),
      p90: pct(l, 0.9),
      p99: pct(l, 0.99),
      mean: l.reduce((a, b) => a + b, 0) / l.length,
    };
  }
  return stats;
}

function latencyRows(db, phase, stats, base) {
  const rows = [];
  for (const [k, s] of Object.entries(stats)) {
    const delta =
      k === base
        ? '—'
        : `${s.p50 - stats[base].p50 >= 0 ? '+' : ''}${fmt(s.p50 - stats[base].p50, 3)} / ${s.p99 - stats[base].p99 >= 0 ? '+' : ''}${fmt(s.p99 - stats[base].p99, 3)}`;
    rows.push(
      `| ${db} | ${phase} | ${k} | ${s.n} | ${fmt(s.p50, 3)} | ${fmt(s.p90, 3)} | ${fmt(s.p99, 3)} | ${fmt(s.mean, 3)} | ${delta} |`,
    );
  }
  return rows;
}

// ------------------------------------------------------------------ a database, end to end

/**
 * One database kind: a server on it; S3 GetObject latencies before and after `rbac init` with
 * 50 rules; then the uncached decisions against the same database.
 */
async function benchDatabase(db) {
  const dataDir = tempDir(db);
  const env = { STATEHOUSE_DATA_DIR: dataDir };
  if (db === 'postgres') {
    env.DATABASE_URL = process.env.DATABASE_URL;
    env.STATEHOUSE_DATABASE_POOL_SIZE = '20';
  }
  const server = await startServer(env);
  const s3rows = [];
  try {
    const p = await principals(server.url);
    const body = smallState();
    const put = s3Client(`${server.url}/s3`, p.admin);
    const r = await put.send('PUT', statePath, body);
    put.close();
    if (r.status !== 200) throw new Error(`PutObject answered ${r.status}: ${r.body}`);

    const before = await getLatencies(
      server.url,
      { [BASELINE]: p.admin, [`${SUBJECT} (not initialised)`]: p.svc },
      body,
    );
    s3rows.push(...latencyRows(db, 'before init', before, BASELINE));
    await grantFiftyRules(server.url);
    const after = await getLatencies(
      server.url,
      { [BASELINE]: p.admin, [`${SUBJECT} (50 rules)`]: p.svc },
      body,
    );
    s3rows.push(...latencyRows(db, 'after init', after, BASELINE));
  } finally {
    await server.stop();
  }

  // Uncached decisions, against the database the server left behind.
  const { createDataSource } = dist('database/data-source.js');
  const { ENTITIES } = dist('entities.js');
  let dataSource;
  let embedded;
  if (db === 'postgres') {
    dataSource = createDataSource({ url: process.env.DATABASE_URL, poolSize: 10 }, ENTITIES);
  } else {
    const { EmbeddedPostgres } = dist('database/embedded-postgres.js');
    embedded = await EmbeddedPostgres.start(dataDir);
    dataSource = createDataSource({ socketDir: embedded.socketDir, poolSize: 1 }, ENTITIES);
  }
  await dataSource.initialize();
  let uncached;
  try {
    uncached = await benchUncached(
      db === 'postgres' ? 'PostgreSQL (pool 10)' : 'embedded PGlite (one connection)',
      dataSource,
      16,
    );
  } finally {
    await dataSource.destroy();
    await embedded?.stop();
  }
  return { s3rows, uncached };
}

// ------------------------------------------------------------------ run

console.log(
  `Statehouse RBAC benchmarks — node ${process.version}, ${new Date().toISOString()}${quick ? ' (quick)' : ''}`,
);

const s3Header = [
  '| database | phase | principal | requests | p50 ms | p90 ms | p99 ms | mean ms | Δ p50 / Δ p99 vs svc:ops, the admin (ms) |',
  '|---|---|---|---|---|---|---|---|---|',
];
const uncachedHeader = [
  '| database | in flight | decisions/s | p50 ms | p99 ms |',
  '|---|---|---|---|---|',
];

try {
  if (!only || only === 'cached') await benchCached();

  const results = [];
  if (!only || only === 'embedded') results.push(await benchDatabase('embedded'));
  if (only === 'postgres') {
    if (!process.env.DATABASE_URL) throw new Error('--only=postgres needs DATABASE_URL');
    results.push(await benchDatabase('postgres'));
  }
  if (results.length > 0) {
    line(
      '\n## 2. uncached decisions (cache miss: flag query + rules query + compile 50 rules + decide)',
    );
    for (const l of uncachedHeader) line(l);
    for (const r of results) for (const l of r.uncached) line(l);
    line(
      `\n## 3. S3 GetObject of a ${smallState().length}-byte state, sequential, keep-alive, ${GETS} requests per principal (blocks of ${BLOCK}, alternating)`,
    );
    for (const l of s3Header) line(l);
    for (const r of results) for (const l of r.s3rows) line(l);
  }

  if (!only) {
    // PostgreSQL: the same, against DATABASE_URL or a throwaway cluster.
    const self = fileURLToPath(import.meta.url);
    const argv = [self, '--only=postgres', ...(quick ? ['--quick'] : [])];
    let out;
    try {
      out = process.env.DATABASE_URL
        ? execFileSync(process.execPath, argv, {
            encoding: 'utf8',
            stdio: ['ignore', 'pipe', 'inherit'],
          })
        : execFileSync(join(root, 'scripts/with-postgres.sh'), [process.execPath, ...argv], {
            encoding: 'utf8',
            stdio: ['ignore', 'pipe', 'inherit'],
          });
    } catch (e) {
      line(`\nPostgreSQL benchmark could not run: ${e.message.split('\n')[0]}`);
    }
    if (out) {
      const rows = out.split('\n').filter((l) => /^\| (PostgreSQL|postgres) /.test(l));
      line('\n## PostgreSQL');
      for (const l of uncachedHeader) line(l);
      for (const l of rows.filter((l) => l.startsWith('| PostgreSQL'))) line(l);
      line('');
      for (const l of s3Header) line(l);
      for (const l of rows.filter((l) => l.startsWith('| postgres'))) line(l);
    }
  }
} finally {
  await cleanupAll();
}
