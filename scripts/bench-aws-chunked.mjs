// `node scripts/bench-aws-chunked.mjs [--mib=50] [--rounds=3]`: how fast the S3 door decodes
// aws-chunked request bodies (the compiled dist/src/s3compat/), best of --rounds on random data
// delivered in 64 KiB pieces like socket reads:
//
//  1. the AwsChunkedParser alone, on STREAMING-UNSIGNED-PAYLOAD-TRAILER (what Terraform sends
//     over https, 64 KiB chunks and a CRC32 trailer) and on STREAMING-AWS4-HMAC-SHA256-PAYLOAD
//     (every 64 KiB chunk signed, so each signature is checked);
//  2. the door's Transform pipeline on the unsigned body: the decoder alone, then with the
//     CRC32 + MD5 verifier behind it.
//
//  It exits non-zero if any run decodes a different number of bytes than it was given.
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { buildIfStale, dist, numberArg } from './lib/bench-common.mjs';

buildIfStale();
const { AwsChunkedParser } = dist('s3compat/aws-chunked.js');
const { checksumBase64 } = dist('s3compat/checksums.js');
const { bodyTransforms, planRequestBody } = dist('s3compat/request-body.js');
const { deriveSigningKey } = dist('s3compat/sigv4.js');

const MIB = numberArg('mib', 50);
const ROUNDS = numberArg('rounds', 3);
const PIECE = 65536;

const AKID = 'AKIAIOSFODNN7EXAMPLE';
const SECRET = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
const EMPTY = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
const SCOPE = '20130524/us-east-1/s3/aws4_request';
const AMZ_DATE = '20130524T000000Z';
const KEY = deriveSigningKey(SECRET, '20130524', 'us-east-1', 's3');
const UNSIGNED = 'STREAMING-UNSIGNED-PAYLOAD-TRAILER';
const SIGNED = 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD';
const SEED = '0'.repeat(64);

const sha = (d) => createHash('sha256').update(d).digest('hex');
const hmac = (k, s) => createHmac('sha256', k).update(s).digest('hex');

/** An aws-chunked body of `data` in chunks of `chunk` bytes, signed when `seed` is given. */
function build(data, chunk, { seed, trailers = [] } = {}) {
  const parts = [];
  let previous = seed;
  const header = (bytes) => {
    let line = bytes.length.toString(16);
    if (previous !== undefined) {
      previous = hmac(
        KEY,
        `AWS4-HMAC-SHA256-PAYLOAD\n${AMZ_DATE}\n${SCOPE}\n${previous}\n${EMPTY}\n${sha(bytes)}`,
      );
      line += `;chunk-signature=${previous}`;
    }
    return line + '\r\n';
  };
  for (let at = 0; at < data.length; at += chunk) {
    const bytes = data.subarray(at, at + chunk);
    parts.push(Buffer.from(header(bytes)), bytes, Buffer.from('\r\n'));
  }
  parts.push(Buffer.from(header(Buffer.alloc(0))));
  for (const [n, v] of trailers) parts.push(Buffer.from(`${n}:${v}\r\n`));
  parts.push(Buffer.from('\r\n'));
  return Buffer.concat(parts);
}

function pieces(body) {
  const out = [];
  for (let i = 0; i < body.length; i += PIECE) out.push(body.subarray(i, i + PIECE));
  return out;
}

function check(n, size, label) {
  if (n === size) return;
  console.error(`bench-aws-chunked: ${label} decoded ${n} bytes of ${size}`);
  process.exit(1);
}

const size = MIB * 1024 * 1024;
const data = randomBytes(size);
const mb = size / (1024 * 1024);
const rate = (ms) => (mb / (ms / 1000)).toFixed(0);

/** Best time in ms of the parser alone over `body`. */
function timeParser(label, opts, body) {
  const input = pieces(body);
  let best = Infinity;
  for (let round = 0; round < ROUNDS; round++) {
    const t0 = process.hrtime.bigint();
    const p = new AwsChunkedParser(opts);
    let n = 0;
    for (const piece of input) for (const d of p.push(piece)) n += d.length;
    p.end();
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    check(n, size, label);
    best = Math.min(best, ms);
  }
  console.log(`aws-chunked ${label}: ${best.toFixed(1)} ms for ${mb} MiB = ${rate(best)} MB/s`);
}

const unsigned = build(data, 65536, { trailers: [['x-amz-checksum-crc32', 'AAAAAA==']] });
timeParser(
  UNSIGNED,
  {
    encoding: UNSIGNED,
    decodedContentLength: size,
    declaredTrailers: ['x-amz-checksum-crc32'],
    signing: undefined,
  },
  unsigned,
);
const signed = build(data, 65536, { seed: SEED });
timeParser(
  SIGNED,
  {
    encoding: SIGNED,
    decodedContentLength: size,
    declaredTrailers: [],
    signing: { signingKey: KEY, amzDate: AMZ_DATE, scope: SCOPE, seedSignature: SEED },
  },
  signed,
);

// The door path: the request's plan, then its Transforms in a pipeline.
const crc = checksumBase64('CRC32', data);
const body = build(data, 65536, { trailers: [['x-amz-checksum-crc32', crc]] });
const planned = planRequestBody(
  { 'x-amz-decoded-content-length': String(size), 'x-amz-trailer': 'x-amz-checksum-crc32' },
  {
    via: 'header',
    accessKeyId: AKID,
    sessionToken: undefined,
    region: 'us-east-1',
    scope: SCOPE,
    amzDate: AMZ_DATE,
    signingKey: KEY,
    seedSignature: SEED,
    validUntil: 0,
    payload: { kind: 'aws-chunked', encoding: UNSIGNED },
  },
);
if (!planned.ok) {
  console.error(`bench-aws-chunked: no plan: ${planned.error.code}: ${planned.error.message}`);
  process.exit(1);
}
const plan = planned.value;
async function timePipeline(withVerifier) {
  let best = Infinity;
  for (let round = 0; round < ROUNDS; round++) {
    const t0 = process.hrtime.bigint();
    let n = 0;
    const { transforms, decoder } = bodyTransforms(plan);
    await pipeline([
      Readable.from(pieces(body)),
      ...(withVerifier ? transforms : [decoder]),
      new Writable({
        write(c, _e, cb) {
          n += c.length;
          cb();
        },
      }),
    ]);
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e6);
    check(n, size, withVerifier ? 'the Transforms' : 'the decoder Transform');
  }
  return best;
}
const decoderOnly = await timePipeline(false);
const full = await timePipeline(true);
console.log(
  `aws-chunked Transform alone: ${decoderOnly.toFixed(1)} ms for ${mb} MiB = ${rate(decoderOnly)} MB/s; ` +
    `with CRC32 + MD5 verification: ${full.toFixed(1)} ms = ${rate(full)} MB/s`,
);
