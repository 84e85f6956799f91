// A reference for `npm run bench`: the smallest NestJS 11 + Express app that does the same work
// as Statehouse's S3 GetObject of a presigned URL, and nothing else — what this stack can do for
// that work. Per GET: verify the SigV4 query signature (signing key cached per date), one
// database query (the object's file), one file read, the answer. No session token, no RBAC, no
// audit, no logging.
//
//   node scripts/bench-ref-nest.mjs <dir>
//
// The database is PostgreSQL when DATABASE_URL is set, else PGlite in memory (in this process,
// as Statehouse's embedded default is). Credentials come from the environment: BENCH_REF_ACCESS_KEY
// and BENCH_REF_SECRET_KEY. `PUT /s3/<key>` stores a body unauthenticated (setup only). Listens
// on 127.0.0.1 (PORT, default any) and prints `{"port":N}`; SIGTERM/SIGINT close it.
import 'reflect-metadata';
import { createHash, createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const require = createRequire(import.meta.url);
const { Controller, Get, Module, Put, Req, Res } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');

const dir = process.argv[2];
if (!dir) {
  process.stderr.write('usage: node scripts/bench-ref-nest.mjs <dir>\n');
  process.exit(2);
}
const ACCESS_KEY = process.env.BENCH_REF_ACCESS_KEY ?? 'AKIAREFERENCE';
const SECRET_KEY = process.env.BENCH_REF_SECRET_KEY ?? 'reference-secret';
const REGION = 'us-east-1';

async function openDatabase() {
  if (process.env.DATABASE_URL) {
    const { Pool } = require('pg');
    const pool = new Pool({ connectionString: process.env.DATABASE_URL, max: 8 });
    return { query: async (text, params) => (await pool.query(text, params)).rows };
  }
  const { PGlite } = await import('@electric-sql/pglite');
  const db = await PGlite.create();
  return { query: async (text, params) => (await db.query(text, params)).rows };
}
const db = await openDatabase();
await db.query(
  'CREATE TABLE IF NOT EXISTS bench_ref_objects (key text PRIMARY KEY, file text NOT NULL, etag text NOT NULL)',
);

const hmac = (key, data) => createHmac('sha256', key).update(data).digest();
let signingKey = { date: '', key: Buffer.alloc(0) };
const keyFor = (date) => {
  if (signingKey.date !== date) {
    const k = hmac(hmac(hmac(hmac(`AWS4${SECRET_KEY}`, date), REGION), 's3'), 'aws4_request');
    signingKey = { date, key: k };
  }
  return signingKey.key;
};
const rfc3986 = (s) =>
  encodeURIComponent(s).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );

/** True when the request carries a valid, unexpired presigned-URL signature for ACCESS_KEY. */
function presignedOk(req) {
  const q = req.query;
  const credential = String(q['X-Amz-Credential'] ?? '');
  const amzDate = String(q['X-Amz-Date'] ?? '');
  const given = String(q['X-Amz-Signature'] ?? '');
  const [access, date, region, service, term] = credential.split('/');
  if (access !== ACCESS_KEY || region !== REGION || service !== 's3' || term !== 'aws4_request')
    return false;
  if (q['X-Amz-Algorithm'] !== 'AWS4-HMAC-SHA256' || q['X-Amz-SignedHeaders'] !== 'host')
    return false;
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(amzDate);
  if (!m || amzDate.slice(0, 8) !== date) return false;
  const signedAt = Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6]);
  if (Date.now() > signedAt + Number(q['X-Amz-Expires'] ?? 0) * 1000) return false;
  const query = Object.keys(q)
    .filter((k) => k !== 'X-Amz-Signature')
    .sort()
    .map((k) => `${rfc3986(k)}=${rfc3986(String(q[k]))}`)
    .join('&');
  const path = req.originalUrl.split('?')[0];
  const canonical = [
    req.method,
    path,
    query,
    `host:${req.headers.host}\n`,
    'host',
    'UNSIGNED-PAYLOAD',
  ].join('\n');
  const scope = `${date}/${REGION}/s3/aws4_request`;
  const toSign = `AWS4-HMAC-SHA256\n${amzDate}\n${scope}\n${createHash('sha256').update(canonical).digest('hex')}`;
  const expected = createHmac('sha256', keyFor(date)).update(toSign).digest();
  const got = Buffer.from(given, 'hex');
  return got.length === expected.length && timingSafeEqual(got, expected);
}

class ObjectsController {
  async get(req, res) {
    if (!presignedOk(req)) return res.status(403).end();
    const rows = await db.query('SELECT file, etag FROM bench_ref_objects WHERE key = $1', [
      req.path,
    ]);
    if (rows.length === 0) return res.status(404).end();
    const body = await readFile(rows[0].file);
    res
      .status(200)
      .set({ 'Content-Type': 'application/json', ETag: `"${rows[0].etag}"` })
      .end(body);
  }

  async put(req, res) {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks);
    const file = join(dir, randomUUID());
    await writeFile(file, body);
    const etag = createHash('md5').update(body).digest('hex');
    await db.query(
      `INSERT INTO bench_ref_objects (key, file, etag) VALUES ($1, $2, $3)
       ON CONFLICT (key) DO UPDATE SET file = excluded.file, etag = excluded.etag`,
      [req.path, file, etag],
    );
    res.status(200).set('ETag', `"${etag}"`).end();
  }
}
// Decorators applied by hand: this is plain JavaScript.
for (const method of ['get', 'put']) {
  Req()(ObjectsController.prototype, method, 0);
  Res()(ObjectsController.prototype, method, 1);
  const descriptor = Object.getOwnPropertyDescriptor(ObjectsController.prototype, method);
  (method === 'get' ? Get : Put)('*key')(ObjectsController.prototype, method, descriptor);
}
Controller('s3')(ObjectsController);
class ReferenceModule {}
Module({ controllers: [ObjectsController] })(ReferenceModule);

const app = await NestFactory.create(ReferenceModule, { logger: false, bodyParser: false });
await app.listen(Number(process.env.PORT ?? 0), '127.0.0.1');
process.stdout.write(`${JSON.stringify({ port: app.getHttpServer().address().port })}\n`);
const stop = () => void app.close().then(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
