// `node scripts/bench-proxy.mjs [--seconds N] [--rounds N] [--size BYTES] [--concurrency N]`:
// the cost of the ingress. An S3 GetObject (SigV4 header-signed, as Terraform sends it) of one
// state, measured in one run directly against a Statehouse replica (http) and through nginx with
// exactly deploy/nginx/statehouse.conf (TLS terminated there, keep-alive to the replica), in
// alternating rounds of scripts/bench-s3-load.mjs (its own process). Prints p50/p99 of each and
// the ratio (through nginx / direct).
//
// Needs nginx (Debian's, /usr/sbin/nginx), openssl and a built dist/ (`npm run build`). The
// replica runs on a fresh embedded database; everything listens on 127.0.0.1 and everything
// started here is stopped, every temporary directory removed, on success, failure or Ctrl-C.
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { baseEnv, CLI, freePort, require, root, TOKEN } from './lib/bench-common.mjs';

const { renderExample, startNginx } = require('../nginx-example.js');
const option = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const SECONDS = option('seconds', 8);
const ROUNDS = option('rounds', 3);
const SIZE = option('size', 100_000);
const CONCURRENCY = option('concurrency', 1);

const scratch = mkdtempSync(join(tmpdir(), 'statehouse-bench-proxy-'));
const stops = [];
async function cleanup() {
  for (const stop of stops.reverse()) await stop().catch(() => undefined);
  rmSync(scratch, { recursive: true, force: true });
}
process.once('SIGINT', () => void cleanup().then(() => process.exit(130)));

/** A replica on a fresh embedded database; resolves with its port once /readyz answers. */
async function startReplica() {
  const port = await freePort();
  const proc = spawn(process.execPath, [CLI, 'serve'], {
    env: {
      ...baseEnv(),
      NODE_ENV: 'production',
      PORT: String(port),
      STATEHOUSE_HOST: '127.0.0.1',
      STATEHOUSE_DATA_DIR: join(scratch, 'data'),
      STATEHOUSE_BOOTSTRAP_TOKEN: TOKEN,
      STATEHOUSE_LOG_LEVEL: 'warn',
      STATEHOUSE_STS_TTL: '1h',
      STATEHOUSE_TRUSTED_PROXIES: '127.0.0.1',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise((res) => proc.once('exit', res));
  stops.push(async () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
    await exited;
  });
  let out = '';
  proc.stdout.on('data', (d) => (out += d));
  proc.stderr.on('data', (d) => (out += d));
  const deadline = Date.now() + 180_000;
  for (;;) {
    const ready = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined);
    if (ready?.status === 200) return port;
    if (proc.exitCode !== null || Date.now() > deadline) throw new Error(`no replica:\n${out}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function call(url, path, token, body) {
  const r = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  if (r.status >= 300) throw new Error(`POST ${path}: ${r.status} ${text}`);
  return JSON.parse(text);
}

/** One round of bench-s3-load.mjs `get` against `s3Url`. */
function load(s3Url, creds, ca) {
  return new Promise((resolve, reject) => {
    const proc = spawn(
      process.execPath,
      [
        join(root, 'scripts/bench-s3-load.mjs'),
        'get',
        s3Url,
        String(CONCURRENCY),
        String(SECONDS),
        String(SIZE),
      ],
      {
        env: {
          ...process.env,
          NODE_EXTRA_CA_CERTS: ca,
          BENCH_S3_ACCESS_KEY_ID: creds.AccessKeyId,
          BENCH_S3_SECRET_ACCESS_KEY: creds.SecretAccessKey,
          BENCH_S3_SESSION_TOKEN: creds.SessionToken,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    let err = '';
    proc.stdout.on('data', (d) => (out += d));
    proc.stderr.on('data', (d) => (err += d));
    proc.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`bench-s3-load exited ${code}: ${err}`));
      const r = JSON.parse(out.trim().split('\n').pop());
      if (r.other > 0 || r.ok === 0)
        return reject(new Error(`failed requests: ${JSON.stringify(r)}`));
      resolve(r);
    });
  });
}

try {
  const replica = await startReplica();
  const direct = `http://127.0.0.1:${replica}`;
  await call(direct, '/v1/rbac/init', TOKEN, { admin: { subject: 'svc:bench' } });
  const { token } = await call(direct, '/v1/auth/tokens', TOKEN, {
    name: 'bench',
    subject: 'svc:bench',
  });
  const creds = await call(direct, '/v1/auth/issue-s3-creds', token);

  const tls = join(scratch, 'tls');
  mkdirSync(tls);
  const [cert, key] = [join(tls, 'proxy.crt'), join(tls, 'proxy.key')];
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '1',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  );
  const port = await freePort();
  const site = renderExample({ port, upstreams: [replica, replica], cert, key });
  writeFileSync(join(scratch, 'statehouse.conf'), site);
  const nginx = await startNginx(join(scratch, 'nginx'), port, site);
  stops.push(nginx.stop);

  const rows = { direct: [], nginx: [] };
  for (let round = 0; round < ROUNDS; round++) {
    rows.direct.push(await load(`${direct}/s3`, creds, cert));
    rows.nginx.push(await load(`${nginx.url}/s3`, creds, cert));
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const summary = (rs) => ({
    p50: median(rs.map((r) => r.p50ms)),
    p99: median(rs.map((r) => r.p99ms)),
    perSecond: median(rs.map((r) => r.perSecond)),
    requests: rs.reduce((n, r) => n + r.ok, 0),
  });
  const d = summary(rows.direct);
  const n = summary(rows.nginx);
  console.log(
    `S3 GetObject of a ${SIZE}-byte state, ${CONCURRENCY} at a time, ${ROUNDS} alternating rounds of ${SECONDS} s (median of the rounds):`,
  );
  const line = (name, s) =>
    `  ${name.padEnd(28)} p50 ${s.p50.toFixed(1)} ms   p99 ${s.p99.toFixed(1)} ms   ${s.perSecond.toFixed(0)} req/s   (${s.requests} requests)`;
  console.log(line('direct (http to the replica)', d));
  console.log(line('through nginx (https, TLS)', n));
  console.log(
    `  ratio nginx/direct            p50 ${(n.p50 / d.p50).toFixed(2)}×   p99 ${(n.p99 / d.p99).toFixed(2)}×`,
  );
} catch (e) {
  console.error(e instanceof Error ? e.message : e);
  process.exitCode = 1;
} finally {
  await cleanup();
}
