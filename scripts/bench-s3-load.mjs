// Load generator for `node scripts/bench-s3.mjs`, run in its own process (an in-process
// generator understates a server). Sends SigV4-signed S3 requests, header-signed as Terraform's
// S3 backend does over http: SignedHeaders host;x-amz-content-sha256;x-amz-date;
// x-amz-security-token, the hex SHA-256 of the body as payload hash for PUT (the empty-string
// hash for GET), `Expect: 100-continue` for bodies of 2 MiB and more. Node built-ins only.
// Prints one JSON line with the results.
//
//   node scripts/bench-s3-load.mjs <scenario> <s3BaseUrl> <concurrency> <seconds> <sizeBytes>
//
// <s3BaseUrl> is the door's address, e.g. http://127.0.0.1:8080/s3 (bucket `tfstate` below it);
// an https address (scripts/bench-proxy.mjs: nginx) trusts the CA of NODE_EXTRA_CA_CERTS.
// Credentials come from the environment (never argv): BENCH_S3_ACCESS_KEY_ID,
// BENCH_S3_SECRET_ACCESS_KEY, BENCH_S3_SESSION_TOKEN.
//
// scenarios:
//   put  each worker writes its own state (key bench/put-<size>-<w>/terraform.tfstate → unit
//        bench/put-<size>-<w>), the serial increasing with every write (from a clock-based
//        start, so runs can repeat against one server);
//   get  each worker first writes its own state bench/get-<size>-<w> once (untimed, serial 1),
//        then reads it back again and again; a read counts when it is a 200 of exactly the
//        bytes written.
//
// Latencies (p50/p99) are from the first byte of the request to the last byte of the answer,
// signing included; the client's SHA-256 of each PUT body is done before that (its total is
// reported as clientHashMs; it is part of the wall clock that requests/s and MB/s are over).
import http from 'node:http';
import https from 'node:https';
import { runWorkers, stateTemplate } from './lib/bench-common.mjs';
import { sha256Hex, sigv4Signer } from './lib/bench-sigv4.mjs';

const [scenario, baseUrl, concArg, secondsArg, sizeArg] = process.argv.slice(2);
const concurrency = Number(concArg);
const seconds = Number(secondsArg);
const size = Number(sizeArg);
if (!['put', 'get'].includes(scenario) || !baseUrl || !(concurrency > 0) || !(seconds > 0)) {
  process.stderr.write(
    'usage: node scripts/bench-s3-load.mjs put|get <s3BaseUrl> <concurrency> <seconds> <sizeBytes>\n',
  );
  process.exit(2);
}
const creds = {
  accessKeyId: process.env.BENCH_S3_ACCESS_KEY_ID ?? '',
  secretAccessKey: process.env.BENCH_S3_SECRET_ACCESS_KEY ?? '',
  sessionToken: process.env.BENCH_S3_SESSION_TOKEN ?? '',
};
const REGION = 'us-east-1';
const BUCKET = 'tfstate';
const EXPECT_CONTINUE_FROM = 2 * 1024 * 1024; // Terraform (aws-sdk-go-v2) sends it from 2 MiB
const EMPTY_SHA256 = sha256Hex('');
const REQUEST_TIMEOUT_MS = 180_000;

const url = new URL(baseUrl);
const prefix = url.pathname.replace(/\/+$/, '');
const transport = url.protocol === 'https:' ? https : http;
const agent = new transport.Agent({ keepAlive: true, maxSockets: concurrency });

// ------------------------------------------------------------------ SigV4 (header signing)

const signer = sigv4Signer(creds, REGION);
/** SigV4 headers for a request without query string; `path` is sent exactly as given. */
const signedHeaders = (method, path, payloadHash) =>
  signer.headers(method, url.host, path, payloadHash);

// ------------------------------------------------------------------ requests

/**
 * One signed request. Resolves { status, bytes, ms, errorBody? } — never rejects: a socket error
 * or timeout is a status of its own (`error:<code>`).
 */
function send(method, path, body, payloadHash) {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const headers = signedHeaders(method, path, payloadHash);
    const expectContinue = body !== undefined && body.length >= EXPECT_CONTINUE_FROM;
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      headers['Content-Length'] = String(body.length);
      if (expectContinue) headers.Expect = '100-continue';
    }
    let settled = false;
    const done = (r) => {
      if (settled) return;
      settled = true;
      resolve({ ...r, ms: performance.now() - t0 });
    };
    let bodySent = false;
    const req = transport.request(
      { host: url.hostname, port: url.port, method, path, agent, headers },
      (res) => {
        let bytes = 0;
        const errorChunks = [];
        let kept = 0;
        const failed = res.statusCode < 200 || res.statusCode >= 300;
        res.on('data', (d) => {
          bytes += d.length;
          if (failed && kept < 4096) {
            errorChunks.push(d);
            kept += d.length;
          }
        });
        res.on('end', () => {
          // Answered before we sent the body (no 100 Continue): the connection cannot be reused.
          if (expectContinue && !bodySent) req.destroy();
          done({
            status: res.statusCode,
            bytes,
            errorBody: failed
              ? Buffer.concat(errorChunks).toString('utf8').slice(0, 4096)
              : undefined,
          });
        });
        res.on('error', (e) => done({ status: `error:${e.code ?? e.message}`, bytes }));
      },
    );
    req.setTimeout(REQUEST_TIMEOUT_MS, () => req.destroy(new Error('timeout')));
    req.on('error', (e) => done({ status: `error:${e.code ?? e.message}`, bytes: 0 }));
    if (body === undefined) req.end();
    else if (expectContinue) {
      req.on('continue', () => {
        bodySent = true;
        req.end(body);
      });
    } else {
      bodySent = true;
      req.end(body);
    }
  });
}

/**
 * A valid v4 state of about `total` bytes shaped like a real one (many resource instances, small
 * outputs), pretty-printed like Terraform, whose serial can be patched in place.
 * (Copied from scripts/bench-load.mjs.)
 */
// ------------------------------------------------------------------ the run

let clientHashMs = 0;
const errorSamples = [];
function noteError(r) {
  if (errorSamples.length < 3 && !errorSamples.some((e) => e.status === r.status)) {
    errorSamples.push({ status: r.status, body: r.errorBody ?? '' });
  }
}

/** PUT a template with serial `serial`, hashing it first (like Terraform over http). */
function putState(path, template, serial) {
  template.setSerial(serial);
  const h0 = performance.now();
  const hash = sha256Hex(template.buf);
  clientHashMs += performance.now() - h0;
  return send('PUT', path, template.buf, hash);
}

async function runAll(work) {
  const r = await runWorkers({ concurrency, seconds, work, onError: noteError });
  return {
    scenario,
    size,
    concurrency,
    ...r,
    clientHashMs: Math.round(clientHashMs),
    errors: errorSamples,
  };
}

const keyPath = (kind, w) => `${prefix}/${BUCKET}/bench/${kind}-${size}-${w}/terraform.tfstate`;

let result;
if (scenario === 'put') {
  const templates = Array.from({ length: concurrency }, () => stateTemplate(size));
  // Serials from the clock (ms), so a later run against the same server still goes forward
  // (the server refuses a lower or equal serial with different bytes).
  const serialBase = Date.now();
  result = await runAll(async (w, i) => {
    const t = templates[w];
    const r = await putState(keyPath('put', w), t, serialBase + i + 1);
    return { ...r, ok: r.status === 200, bytes: t.buf.length };
  });
} else {
  const template = stateTemplate(size);
  const expected = template.buf.length;
  // Seed each worker's state (untimed). Serial 1 with the same bytes is accepted again, so a
  // second run against the same server is fine.
  const seeded = await Promise.all(
    Array.from({ length: concurrency }, (_, w) => putState(keyPath('get', w), template, 1)),
  );
  const failedSeed = seeded.find((r) => r.status !== 200);
  if (failedSeed) {
    agent.destroy();
    process.stdout.write(
      `${JSON.stringify({
        scenario,
        size,
        concurrency,
        seedFailed: true,
        ok: 0,
        other: 0,
        perSecond: 0,
        mbPerSecond: 0,
        p50ms: 0,
        p99ms: 0,
        errors: [{ status: failedSeed.status, body: failedSeed.errorBody ?? '' }],
      })}\n`,
    );
    process.exit(0);
  }
  clientHashMs = 0;
  result = await runAll(async (w) => {
    const r = await send('GET', keyPath('get', w), undefined, EMPTY_SHA256);
    return { ...r, ok: r.status === 200 && r.bytes === expected };
  });
}
agent.destroy();
process.stdout.write(`${JSON.stringify(result)}\n`);
