// `node scripts/bench-tokens.mjs`: the figures the identity issue asks for.
//
//  1. verifications per second of verifyStatehouseJwt (the compiled dist/src/auth/tokens/jwt.js)
//     with a cached key set, in a loop for ~3 s on one core; for comparison, the same with the
//     key imported from its JWK on every verification (no cache), and a refusal (unknown kid);
//  2. (unless --no-http) the cost of an HTTP request to the real server process authenticated
//     by an access token, by an API token and by the bootstrap token, against a public route.
//
// Options: --seconds=N (per measurement, default 3), --no-http, --concurrency=N (default 16).
import { spawn } from 'node:child_process';
import { createPublicKey, generateKeyPairSync, randomUUID, verify } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  args,
  baseEnv,
  buildIfStale,
  captureOutput,
  CLI,
  freePort,
  numberArg as opt,
  require,
  root,
  stopProcess,
  waitReady,
} from './lib/bench-common.mjs';

const SECONDS = opt('seconds', 3);
const CONCURRENCY = opt('concurrency', 16);
const HTTP = !args.includes('--no-http');

try {
  buildIfStale();
} catch (e) {
  if (!existsSync(join(root, 'dist/src/auth/tokens/jwt.js'))) throw e;
  console.error(`bench-tokens: build failed (${e.message}); using the existing dist/`);
}
const { verifyStatehouseJwt, TokenRejected } = require(join(root, 'dist/src/auth/tokens/jwt.js'));
const { SignJWT } = require('jose');

const ISSUER = 'http://statehouse.bench.test';
const KID = 'bench-key-1';
const fmt = (n, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d });

async function accessToken(privateKey, sub = 'user:bench') {
  return new SignJWT({ email: 'bench@example.com', groups: ['platform', 'ops'] })
    .setProtectedHeader({ alg: 'EdDSA', kid: KID, typ: 'JWT' })
    .setIssuer(ISSUER)
    .setSubject(sub)
    .setAudience(['api'])
    .setIssuedAt()
    .setExpirationTime('1h')
    .setJti(randomUUID())
    .sign(privateKey);
}

/** Runs `fn` back to back for SECONDS; answers operations per second and mean µs. */
async function loop(fn) {
  for (let i = 0; i < 2000; i++) await fn(); // warm-up (JIT, caches)
  let n = 0;
  const t0 = performance.now();
  const end = t0 + SECONDS * 1000;
  while (performance.now() < end) {
    for (let i = 0; i < 100; i++) await fn();
    n += 100;
  }
  const ms = performance.now() - t0;
  return { n, perSecond: (n / ms) * 1000, meanUs: (ms * 1000) / n };
}

async function verifierFigures() {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const keys = new Map([[KID, publicKey]]);
  const options = { issuer: ISSUER, audience: 'api' };
  const token = await accessToken(privateKey);
  const claims = await verifyStatehouseJwt(token, keys, options);
  if (claims.sub !== 'user:bench') throw new Error('the benchmark token does not verify');

  const cached = await loop(() => verifyStatehouseJwt(token, keys, options));

  const jwk = publicKey.export({ format: 'jwk' });
  const uncached = await loop(() =>
    verifyStatehouseJwt(
      token,
      new Map([[KID, createPublicKey({ key: jwk, format: 'jwk' })]]),
      options,
    ),
  );

  const stranger = generateKeyPairSync('ed25519').privateKey;
  const forged = await new SignJWT({ aud: ['api'], jti: 'x' })
    .setProtectedHeader({ alg: 'EdDSA', kid: 'unknown' })
    .setIssuer(ISSUER)
    .setSubject('bootstrap-admin')
    .setIssuedAt()
    .setExpirationTime('1h')
    .sign(stranger);
  const refused = await loop(async () => {
    try {
      await verifyStatehouseJwt(forged, keys, options);
    } catch (e) {
      if (!(e instanceof TokenRejected)) throw e;
    }
  });
  const tampered = token.slice(0, -4) + (token.endsWith('AAAA') ? 'BBBB' : 'AAAA');
  const badSig = await loop(async () => {
    try {
      await verifyStatehouseJwt(tampered, keys, options);
    } catch (e) {
      if (!(e instanceof TokenRejected)) throw e;
    }
  });

  // Baselines: the bare Ed25519 signature check of the same token, sync and on the thread pool.
  const [h, p, sig] = token.split('.');
  const input = Buffer.from(`${h}.${p}`);
  const signature = Buffer.from(sig, 'base64url');
  if (!verify(null, input, publicKey, signature)) throw new Error('baseline does not verify');
  const rawSync = await loop(() => verify(null, input, publicKey, signature));
  const rawAsync = await loop(
    () =>
      new Promise((res, rej) =>
        verify(null, input, publicKey, signature, (err, ok) => (err || !ok ? rej(err) : res())),
      ),
  );

  console.log(
    `\n1. verifyStatehouseJwt, one core, ${SECONDS} s per figure (node ${process.version})`,
  );
  const row = (what, r) =>
    console.log(
      `   ${what.padEnd(44)} ${fmt(r.perSecond).padStart(9)} /s   ${fmt(r.meanUs, 1).padStart(7)} µs each   (${fmt(r.n)} runs)`,
    );
  row('valid token, cached key set', cached);
  row('valid token, key imported from JWK each time', uncached);
  row('refused: unknown kid (no signature check)', refused);
  row('refused: bad signature', badSig);
  row('baseline: node:crypto Ed25519 verify (sync)', rawSync);
  row('baseline: node:crypto Ed25519 verify (async)', rawAsync);
  return cached;
}

// ---------------------------------------------------------------- HTTP (real server process)

async function startServer(env) {
  const port = await freePort();
  const proc = spawn(process.execPath, [CLI, 'serve'], {
    env: { ...baseEnv(), NODE_ENV: 'production', PORT: String(port), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const log = captureOutput(proc);
  const url = `http://127.0.0.1:${port}`;
  await waitReady(url, proc, log, Date.now() + 60_000, 25);
  return { url, port, stop: () => stopProcess(proc) };
}

const agent = new Agent({ keepAlive: true, maxSockets: 256 });
function get(port, path, authorization) {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path, agent, headers: authorization ? { authorization } : {} },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** `concurrency` clients doing GET `path` back to back for SECONDS. */
async function hammer(port, path, authorization, concurrency) {
  for (let i = 0; i < 200; i++) {
    const s = await get(port, path, authorization);
    if (s !== 200) throw new Error(`GET ${path} answered ${s}`);
  }
  const lat = [];
  const end = performance.now() + SECONDS * 1000;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        const s = await get(port, path, authorization);
        if (s !== 200) throw new Error(`GET ${path} answered ${s}`);
        lat.push(performance.now() - t);
      }
    }),
  );
  const ms = performance.now() - t0;
  lat.sort((a, b) => a - b);
  return {
    perSecond: (lat.length / ms) * 1000,
    p50: lat[Math.floor(lat.length * 0.5)],
    p99: lat[Math.floor(lat.length * 0.99)],
  };
}

async function httpFigures() {
  const dir = mkdtempSync(join(tmpdir(), 'statehouse-bench-tokens-'));
  const { privateKey } = generateKeyPairSync('ed25519');
  const keyFile = join(dir, 'signing.pem');
  writeFileSync(keyFile, privateKey.export({ type: 'pkcs8', format: 'pem' }));
  const bootstrap = 'bench-bootstrap-token-0123456789abcdefghij';
  const server = await startServer({
    STATEHOUSE_HOST: '127.0.0.1',
    STATEHOUSE_DATA_DIR: join(dir, 'data'),
    STATEHOUSE_BOOTSTRAP_TOKEN: bootstrap,
    STATEHOUSE_PUBLIC_URL: ISSUER,
    STATEHOUSE_TOKENS_PRIVATE_KEY_FILE: keyFile,
    STATEHOUSE_TOKENS_KID: KID,
    STATEHOUSE_LOG_LEVEL: 'warn',
  });
  try {
    // A token signed with the server's own (configured) key is one of its access tokens.
    const access = await accessToken(privateKey);
    const created = await fetch(`${server.url}/v1/auth/tokens`, {
      method: 'POST',
      headers: { authorization: `Bearer ${bootstrap}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'bench', subject: 'svc:bench' }),
    });
    if (created.status !== 201) throw new Error(`cannot create an API token: ${created.status}`);
    const apiToken = (await created.json()).token;

    const cases = [
      ['public route, no credential (/v1/auth/config)', '/v1/auth/config', undefined],
      ['access token (/v1/auth/me)', '/v1/auth/me', `Bearer ${access}`],
      ['API token (/v1/auth/me)', '/v1/auth/me', `Bearer ${apiToken}`],
      ['bootstrap token (/v1/auth/me)', '/v1/auth/me', `Bearer ${bootstrap}`],
    ];
    for (const concurrency of [1, CONCURRENCY]) {
      console.log(
        `\n2. HTTP requests to the server process (embedded database), ${concurrency} client${concurrency > 1 ? 's' : ''}, ${SECONDS} s each`,
      );
      for (const [what, path, auth] of cases) {
        const r = await hammer(server.port, path, auth, concurrency);
        console.log(
          `   ${what.padEnd(48)} ${fmt(r.perSecond).padStart(7)} req/s   p50 ${fmt(r.p50, 2).padStart(6)} ms   p99 ${fmt(r.p99, 2).padStart(6)} ms`,
        );
      }
    }
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await verifierFigures();
if (HTTP) await httpFigures();
agent.destroy();
