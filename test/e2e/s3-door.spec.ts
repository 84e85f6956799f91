/**
 * The `/s3` door at the HTTP level: requests signed here (SigV4 with node:crypto, so they can be
 * broken on purpose) sent with node:http exactly as written, against the real `statehouse serve`
 * process. Every refusal is checked three ways: the HTTP status, the S3 XML error body (Code,
 * Message, Resource, RequestId; no body on HEAD) and — through the management API and the blob
 * directory — that nothing was stored. At the end, the server's output is searched for every
 * secret and signature presented to it.
 *
 * Servers: the main one (with a signing key and an OpenID provider configured here, so an
 * expired session token can be made and an ordinary API access token obtained), and a small
 * one with STATEHOUSE_MAX_STATE_BYTES=64KiB and STATEHOUSE_STS_TTL=60s (oversized bodies, and
 * credentials that really expire: the last test waits for that).
 */
import { SignatureV4 } from '@smithy/signature-v4';
import type { Checksum, SourceData } from '@smithy/types';
import { SignJWT } from 'jose';
import { createHash, createHmac, generateKeyPairSync, Hash, Hmac, randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { IncomingHttpHeaders, request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { freshServerEnv, ON_POSTGRES } from '../support/database';
import { startOidcProvider, TestOidcProvider } from '../support/oidc';
import { FIXTURES } from '../support/paths';
import { RunningServer, spawnServer } from '../support/server';
import { tfStateBytes } from '../support/tf-state';

jest.setTimeout(120_000);

const BUCKET = 'tfstate';
const REGION = 'us-east-1';
const PUBLIC_URL = 'http://statehouse.s3-door.test';
const TOKEN_KID = 's3-door-e2e';
const OIDC_CLIENT_ID = 'statehouse-cli';
const SIMPLE = readFileSync(join(FIXTURES, 'simple.tfstate'));
const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
const MiB = 1024 * 1024;

// ------------------------------------------------------------------------------------ helpers

interface Creds {
  AccessKeyId: string;
  SecretAccessKey: string;
  SessionToken: string;
  Expiration: string;
}

interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  text: string;
}

const sha256Hex = (b: Buffer | string): string => createHash('sha256').update(b).digest('hex');
const md5Hex = (b: Buffer | string): string => createHash('md5').update(b).digest('hex');
const md5B64 = (b: Buffer | string): string => createHash('md5').update(b).digest('base64');
const sha256B64 = (b: Buffer | string): string => createHash('sha256').update(b).digest('base64');
const hmac = (key: Buffer | string, data: string): Buffer =>
  createHmac('sha256', key).update(data, 'utf8').digest();
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** CRC-32 (IEEE) of `buf`, big-endian, base64 — the x-amz-checksum-crc32 form. */
function crc32B64(buf: Buffer): string {
  let c = 0xffffffff;
  for (const b of buf) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  const out = Buffer.alloc(4);
  out.writeUInt32BE((c ^ 0xffffffff) >>> 0);
  return out.toString('base64');
}

/** A Terraform v4 state, pretty-printed like Terraform writes it. */
function tfState(serial: number, lineage: string, pad = ''): Buffer {
  return tfStateBytes({ serial, lineage, outputs: pad === '' ? {} : { pad } });
}

/** A valid state of exactly `size` bytes. */
function stateOfSize(size: number, serial: number, lineage: string): Buffer {
  const base = tfState(serial, lineage, 'x').length;
  const body = tfState(serial, lineage, 'x'.repeat(size - base + 1));
  expect(body.length).toBe(size);
  return body;
}

function lockInfo(id: string, key: string): string {
  return `{"ID":"${id}","Operation":"OperationTypeApply","Info":"","Who":"door@e2e","Version":"1.11.4","Created":"2026-01-02T03:04:05.123456789Z","Path":"${BUCKET}/${key}"}`;
}

/** RFC 3986 encoding (SigV4's UriEncode for query names and values). */
function rfc3986(s: string): string {
  return encodeURIComponent(s).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

function canonicalQuery(raw: string): string {
  const dec = (s: string): string => decodeURIComponent(s.replace(/\+/g, ' '));
  return raw
    .split('&')
    .filter((p) => p !== '')
    .map((p) => {
      const i = p.indexOf('=');
      return [rfc3986(dec(i < 0 ? p : p.slice(0, i))), rfc3986(dec(i < 0 ? '' : p.slice(i + 1)))];
    })
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0))
    .map(([n, v]) => `${n}=${v}`)
    .join('&');
}

function amzDateOf(ms: number): string {
  return new Date(ms)
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}Z$/, 'Z');
}

function signingKeyOf(secret: string, date: string): Buffer {
  return hmac(hmac(hmac(hmac(`AWS4${secret}`, date), REGION), 's3'), 'aws4_request');
}

/** Every signature and secret this file sends: none may appear in a server's output. */
const presented = new Set<string>();

interface SignInput {
  method: string;
  /** The path exactly as sent (and signed as the canonical URI). */
  path: string;
  /** The raw query, without `?`. */
  query?: string;
  /** Extra headers, sent and signed (lower-case names). */
  headers?: Record<string, string>;
  /** A body to send as is; with `payloadHash` unset, its hex SHA-256 is signed. */
  body?: Buffer;
  /** x-amz-content-sha256 (default: hex SHA-256 of `body`). */
  payloadHash?: string;
  creds: Creds;
  /** X-Amz-Security-Token: default the creds' own; null sends none. */
  token?: string | null;
  /** Signs with this access key id in the Credential instead. */
  accessKeyId?: string;
  /** The request time (default now). */
  time?: number;
}

interface Signed {
  headers: Record<string, string>;
  signature: string;
  signingKey: Buffer;
  amzDate: string;
  scope: string;
}

/** SigV4 (header auth) of a request to `srv`, as the AWS SDKs compute it. */
function sign(srv: RunningServer, i: SignInput): Signed {
  const time = i.time ?? Date.now();
  const amzDate = amzDateOf(time);
  const date = amzDate.slice(0, 8);
  const scope = `${date}/${REGION}/s3/aws4_request`;
  const token = i.token === undefined ? i.creds.SessionToken : i.token;
  const headers: Record<string, string> = {
    host: `127.0.0.1:${srv.port}`,
    'x-amz-date': amzDate,
    'x-amz-content-sha256': i.payloadHash ?? sha256Hex(i.body ?? Buffer.alloc(0)),
    ...(token !== null ? { 'x-amz-security-token': token } : {}),
    // Like the SDKs: a signed id per call, so two identical calls in one second are two
    // signatures (the door accepts each signed write once).
    'amz-sdk-invocation-id': randomUUID(),
    ...i.headers,
  };
  const names = Object.keys(headers).sort();
  const canonical = [
    i.method,
    i.path,
    canonicalQuery(i.query ?? ''),
    names.map((n) => `${n}:${headers[n].trim().replace(/\s+/g, ' ')}\n`).join(''),
    names.join(';'),
    headers['x-amz-content-sha256'],
  ].join('\n');
  const stringToSign = `AWS4-HMAC-SHA256\n${amzDate}\n${scope}\n${sha256Hex(canonical)}`;
  const signingKey = signingKeyOf(i.creds.SecretAccessKey, date);
  const signature = hmac(signingKey, stringToSign).toString('hex');
  presented.add(signature);
  headers.authorization = `AWS4-HMAC-SHA256 Credential=${i.accessKeyId ?? i.creds.AccessKeyId}/${scope}, SignedHeaders=${names.join(';')}, Signature=${signature}`;
  return { headers, signature, signingKey, amzDate, scope };
}

/** What goes on the wire; a tamper function may change any of it after signing. */
interface Outgoing {
  method: string;
  path: string;
  query: string;
  headers: Record<string, string>;
  body?: Buffer;
}

interface CallInput extends Omit<SignInput, 'body'> {
  /** The body, or a function of the signature (aws-chunked bodies chain from it). */
  body?: Buffer | ((s: Signed) => Buffer);
  tamper?: (o: Outgoing) => void;
}

/** Signs and sends one request; the Content-Length is the body's unless a header sets it. */
function call(srv: RunningServer, i: CallInput): Promise<Reply> {
  const plainBody = Buffer.isBuffer(i.body) ? i.body : undefined;
  const signed = sign(srv, { ...i, body: plainBody });
  const out: Outgoing = {
    method: i.method,
    path: i.path,
    query: i.query ?? '',
    headers: { ...signed.headers },
    body: typeof i.body === 'function' ? i.body(signed) : i.body,
  };
  i.tamper?.(out);
  return send(srv, out);
}

function send(srv: RunningServer, o: Outgoing): Promise<Reply> {
  return new Promise((resolve, reject) => {
    let responded = false;
    const headers = { ...o.headers };
    if (
      o.body !== undefined &&
      headers['content-length'] === undefined &&
      headers['transfer-encoding'] === undefined
    ) {
      headers['content-length'] = String(o.body.length);
    }
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port: srv.port,
        method: o.method,
        path: o.query === '' ? o.path : `${o.path}?${o.query}`,
        headers,
        agent: false,
      },
      (res) => {
        responded = true;
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const body = Buffer.concat(parts);
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body,
            text: body.toString(),
          });
        });
      },
    );
    // A server that answers early (an error before the whole body was read) may cut the upload:
    // the answer counts. A connection cut before any answer is status 0, so the test says so.
    req.on('error', (e) => {
      if (responded) return;
      const text = `<no answer: ${e.message}>`;
      resolve({ status: 0, headers: {}, body: Buffer.from(text), text });
    });
    req.end(o.body);
  });
}

/** A presigned URL (query auth), as @aws-sdk/s3-request-presigner makes it. */
function presign(
  srv: RunningServer,
  p: { path: string; creds: Creds; time?: number; expires: number; token?: string },
): string {
  const amzDate = amzDateOf(p.time ?? Date.now());
  const date = amzDate.slice(0, 8);
  const scope = `${date}/${REGION}/s3/aws4_request`;
  const params: [string, string][] = [
    ['X-Amz-Algorithm', 'AWS4-HMAC-SHA256'],
    ['X-Amz-Content-Sha256', 'UNSIGNED-PAYLOAD'],
    ['X-Amz-Credential', `${p.creds.AccessKeyId}/${scope}`],
    ['X-Amz-Date', amzDate],
    ['X-Amz-Expires', String(p.expires)],
    ['X-Amz-Security-Token', p.token ?? p.creds.SessionToken],
    ['X-Amz-SignedHeaders', 'host'],
    ['x-id', 'GetObject'],
  ];
  const query = params.map(([n, v]) => `${rfc3986(n)}=${rfc3986(v)}`).join('&');
  const canonical = [
    'GET',
    p.path,
    canonicalQuery(query),
    `host:127.0.0.1:${srv.port}\n`,
    'host',
    'UNSIGNED-PAYLOAD',
  ].join('\n');
  const signature = hmac(
    signingKeyOf(p.creds.SecretAccessKey, date),
    `AWS4-HMAC-SHA256\n${amzDate}\n${scope}\n${sha256Hex(canonical)}`,
  ).toString('hex');
  presented.add(signature);
  return `${p.path}?${query}&X-Amz-Signature=${signature}`;
}

/** An unsigned-payload aws-chunked body with trailers (Terraform over https). */
function chunkedTrailer(data: Buffer, chunk: number, trailers: Record<string, string>): Buffer {
  const parts: Buffer[] = [];
  for (let at = 0; at < data.length; at += chunk) {
    const piece = data.subarray(at, at + chunk);
    parts.push(Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n'));
  }
  const lines = Object.entries(trailers)
    .map(([k, v]) => `${k}:${v}\r\n`)
    .join('');
  parts.push(Buffer.from(`0\r\n${lines}\r\n`));
  return Buffer.concat(parts);
}

/** A STREAMING-AWS4-HMAC-SHA256-PAYLOAD body: every chunk signed, chained from the seed. */
function chunkedSigned(s: Signed, data: Buffer, chunk: number): Buffer {
  const parts: Buffer[] = [];
  let previous = s.signature;
  const signChunk = (piece: Buffer): string => {
    const sig = hmac(
      s.signingKey,
      `AWS4-HMAC-SHA256-PAYLOAD\n${s.amzDate}\n${s.scope}\n${previous}\n${EMPTY_SHA256}\n${sha256Hex(piece)}`,
    ).toString('hex');
    presented.add(sig);
    previous = sig;
    return sig;
  };
  for (let at = 0; at < data.length; at += chunk) {
    const piece = data.subarray(at, at + chunk);
    parts.push(
      Buffer.from(`${piece.length.toString(16)};chunk-signature=${signChunk(piece)}\r\n`),
      piece,
      Buffer.from('\r\n'),
    );
  }
  parts.push(Buffer.from(`0;chunk-signature=${signChunk(Buffer.alloc(0))}\r\n\r\n`));
  return Buffer.concat(parts);
}

/**
 * An S3 error answer: status, S3 XML with Code, Message, Resource (the path) and RequestId (the
 * x-amz-request-id header); HEAD errors carry no body. Returns the Message.
 */
function expectS3Error(
  r: Reply,
  status: number,
  code: string,
  opts: { resource?: string; head?: boolean; message?: RegExp | string } = {},
): string {
  expect({
    status: r.status,
    code: opts.head ? code : /<Code>([^<]*)<\/Code>/.exec(r.text)?.[1],
  }).toEqual({ status, code });
  expect(r.status).not.toBe(500);
  const requestId = r.headers['x-amz-request-id'];
  expect(requestId).toEqual(expect.any(String));
  expect(requestId).not.toBe('');
  if (opts.head) {
    expect(r.body.length).toBe(0);
    return '';
  }
  expect(r.headers['content-type']).toMatch(/^application\/xml/);
  const m =
    /^<\?xml version="1\.0" encoding="UTF-8"\?>\n<Error><Code>([^<]+)<\/Code><Message>([^<]*)<\/Message><Resource>([^<]*)<\/Resource><RequestId>([^<]+)<\/RequestId><\/Error>$/.exec(
      r.text,
    );
  if (!m) throw new Error(`not an S3 XML error body:\n${r.text}`);
  expect(m[4]).toBe(requestId);
  if (opts.resource !== undefined) expect(m[3]).toBe(opts.resource);
  const message = m[2]
    .replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
  expect(message.length).toBeGreaterThan(0);
  if (opts.message !== undefined) {
    if (typeof opts.message === 'string') expect(message).toContain(opts.message);
    else expect(message).toMatch(opts.message);
  }
  return message;
}

/** A successful answer carries no x-amz-checksum-* header (none is better than a wrong one). */
function expectNoChecksumHeaders(r: Reply): void {
  expect(Object.keys(r.headers).filter((h) => h.startsWith('x-amz-checksum-'))).toEqual([]);
}

/** The response to a HEAD read off a raw socket: the status line, headers and any bytes after. */
function rawHead(
  srv: RunningServer,
  path: string,
  headers: Record<string, string>,
): Promise<{ head: string; after: Buffer }> {
  return new Promise((resolve, reject) => {
    const socket = connect(srv.port, '127.0.0.1');
    const parts: Buffer[] = [];
    socket.on('data', (d: Buffer) => parts.push(d));
    socket.on('error', reject);
    socket.on('close', () => {
      const all = Buffer.concat(parts);
      const end = all.indexOf('\r\n\r\n');
      resolve({ head: all.subarray(0, end).toString('latin1'), after: all.subarray(end + 4) });
    });
    const lines = Object.entries({ ...headers, connection: 'close' })
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    socket.write(`HEAD ${path} HTTP/1.1\r\n${lines}\r\n`);
  });
}

/** node:crypto as the SHA-256 constructor `@smithy/signature-v4` takes. */
class NodeSha256 implements Checksum {
  private hash: Hash | Hmac;
  constructor(private readonly secret?: SourceData) {
    this.hash = this.fresh();
  }
  private fresh(): Hash | Hmac {
    return this.secret === undefined
      ? createHash('sha256')
      : createHmac('sha256', toBuffer(this.secret));
  }
  update(data: Uint8Array | string): void {
    this.hash.update(toBuffer(data));
  }
  digest(): Promise<Uint8Array> {
    return Promise.resolve(new Uint8Array(this.hash.digest()));
  }
  reset(): void {
    this.hash = this.fresh();
  }
}

function toBuffer(data: SourceData): Buffer {
  if (typeof data === 'string') return Buffer.from(data, 'utf8');
  if (ArrayBuffer.isView(data)) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  return Buffer.from(data);
}

// ------------------------------------------------------------------------------------ servers

interface Door {
  srv: RunningServer;
  dataDir: string;
  cleanup: () => Promise<void>;
}

let door: Door;
let small: Door;
let provider: TestOidcProvider;
const signingKey = generateKeyPairSync('ed25519');
let keyDir: string;

let mainToken: string;
let main: Creds;
let other: Creds;
let smallCreds: Creds;
let accessToken: string;

async function api(
  d: Door,
  path: string,
  init: RequestInit = {},
  bearer = d.srv.token,
): Promise<Response> {
  return fetch(`${d.srv.url}${path}`, {
    ...init,
    headers: {
      Authorization: `Bearer ${bearer}`,
      ...(init.headers as Record<string, string> | undefined),
    },
  });
}

async function apiToken(d: Door, subject: string): Promise<string> {
  const res = await api(d, '/v1/auth/tokens', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: `s3-door ${subject}`, subject }),
  });
  expect(res.status).toBe(201);
  const token = ((await res.json()) as { token: string }).token;
  presented.add(token);
  return token;
}

async function issueCreds(d: Door, bearer: string): Promise<Creds> {
  const res = await api(d, '/v1/auth/issue-s3-creds', { method: 'POST' }, bearer);
  expect(res.status).toBe(200);
  const creds = (await res.json()) as Creds;
  presented.add(creds.SecretAccessKey);
  presented.add(creds.SessionToken);
  return creds;
}

/** What is stored, as the management API and the blob directory show it. */
async function snapshot(d: Door, unit?: string, workspace = 'default'): Promise<unknown> {
  const units = await api(d, '/v1/units?limit=1000');
  expect(units.status).toBe(200);
  const names = ((await units.json()) as { items: { name: string }[] }).items.map((u) => u.name);
  let versions: unknown;
  if (unit !== undefined) {
    const v = await api(
      d,
      `/v1/units/${encodeURIComponent(unit)}/versions?workspace=${encodeURIComponent(workspace)}`,
    );
    versions = { status: v.status, body: v.status === 200 ? await v.json() : undefined };
  }
  return { names, versions, blobs: blobFiles(d) };
}

/** Every file under the blob directory (filesystem storage only; undefined on PostgreSQL). */
function blobFiles(d: Door): string[] | undefined {
  if (ON_POSTGRES) return undefined;
  const root = join(d.dataDir, 'blobs');
  const out: string[] = [];
  const walk = (dir: string): void => {
    if (!existsSync(dir)) return;
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else out.push(relative(root, p));
    }
  };
  walk(root);
  return out.sort();
}

/** Runs a refused write and checks that nothing at all was stored by it. */
async function refused(
  d: Door,
  target: { unit?: string; workspace?: string },
  write: () => Promise<Reply>,
): Promise<Reply> {
  const before = await snapshot(d, target.unit, target.workspace);
  const r = await write();
  expect(r.status).toBeGreaterThanOrEqual(400);
  expect(await snapshot(d, target.unit, target.workspace)).toEqual(before);
  return r;
}

async function currentState(
  d: Door,
  unit: string,
  workspace = 'default',
): Promise<Buffer | number> {
  const res = await api(
    d,
    `/v1/units/${encodeURIComponent(unit)}/state?workspace=${encodeURIComponent(workspace)}`,
  );
  if (res.status !== 200) return res.status;
  return Buffer.from(await res.arrayBuffer());
}

const objectPath = (key: string): string =>
  `/s3/${BUCKET}/${key
    .split('/')
    .map((s) => rfc3986(s))
    .join('/')}`;

/** A plain signed PutObject of a state (hex x-amz-content-sha256). */
function putState(
  d: Door,
  creds: Creds,
  key: string,
  body: Buffer,
  extra: Partial<CallInput> = {},
) {
  return call(d.srv, { method: 'PUT', path: objectPath(key), body, creds, ...extra });
}

function getObject(d: Door, creds: Creds, key: string, extra: Partial<CallInput> = {}) {
  return call(d.srv, { method: 'GET', path: objectPath(key), creds, ...extra });
}

async function startDoor(env: Record<string, string>): Promise<Door> {
  const fresh = await freshServerEnv();
  const srv = await spawnServer({ ...fresh.env, ...env });
  return { srv, dataDir: fresh.dataDir, cleanup: fresh.cleanup };
}

/** A session token like the server's own (its signing key is configured here), with overrides. */
function sessionToken(of: Creds, claims: { iat: number; exp: number }): Promise<string> {
  const payload = JSON.parse(
    Buffer.from(of.SessionToken.split('.')[1], 'base64url').toString(),
  ) as {
    sub: string;
    sid: string;
    iss: string;
    parent: string;
  };
  return new SignJWT({ sid: payload.sid, parent: payload.parent })
    .setProtectedHeader({ alg: 'EdDSA', kid: TOKEN_KID, typ: 'JWT' })
    .setIssuer(payload.iss)
    .setSubject(payload.sub)
    .setAudience(['s3'])
    .setIssuedAt(claims.iat)
    .setExpirationTime(claims.exp)
    .setJti(randomUUID())
    .sign(signingKey.privateKey);
}

beforeAll(async () => {
  keyDir = mkdtempSync(join(tmpdir(), 'statehouse-s3-door-key-'));
  const keyFile = join(keyDir, 'signing.pem');
  writeFileSync(keyFile, signingKey.privateKey.export({ type: 'pkcs8', format: 'pem' }));
  provider = await startOidcProvider();
  // The small server first: its 60-second credentials are issued at once, and expire while the
  // rest of the file runs (the last test waits for what is left).
  small = await startDoor({ STATEHOUSE_MAX_STATE_BYTES: '64KiB', STATEHOUSE_STS_TTL: '60s' });
  smallCreds = await issueCreds(small, await apiToken(small, 'svc:door-small'));
  door = await startDoor({
    STATEHOUSE_PUBLIC_URL: PUBLIC_URL,
    STATEHOUSE_TOKENS_PRIVATE_KEY_FILE: keyFile,
    STATEHOUSE_TOKENS_KID: TOKEN_KID,
    STATEHOUSE_OIDC_ISSUER: provider.issuer,
    STATEHOUSE_OIDC_CLIENT_ID: OIDC_CLIENT_ID,
    STATEHOUSE_STS_TTL: '1h',
  });
  mainToken = await apiToken(door, 'svc:door-main');
  main = await issueCreds(door, mainToken);
  other = await issueCreds(door, await apiToken(door, 'svc:door-other'));

  const idToken = await provider.mint({
    sub: 'alice',
    aud: OIDC_CLIENT_ID,
    email: 'alice@example.com',
    email_verified: true,
  });
  const exchanged = await fetch(`${door.srv.url}/v1/auth/exchange`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ id_token: idToken }),
  });
  expect(exchanged.status).toBe(200);
  accessToken = ((await exchanged.json()) as { access_token: string }).access_token;
  presented.add(accessToken);
}, 120_000);

afterAll(async () => {
  await door?.srv.stop();
  await small?.srv.stop();
  await door?.cleanup();
  await small?.cleanup();
  await provider?.stop();
  if (keyDir) rmSync(keyDir, { recursive: true, force: true });
});

// ------------------------------------------------------------------------------------ tests

describe('requests signed here are accepted (the baseline every refusal below breaks)', () => {
  const key = 'ok/app/terraform.tfstate';

  it('PutObject with hex x-amz-content-sha256: 200, ETag = quoted MD5, stored byte for byte', async () => {
    const r = await putState(door, main, key, SIMPLE);
    expect(r.status).toBe(200);
    expect(r.headers.etag).toBe(`"${md5Hex(SIMPLE)}"`);
    expectNoChecksumHeaders(r);
    expect(await currentState(door, 'ok/app')).toEqual(SIMPLE);
  });

  it('GetObject and HeadObject: exact bytes, Content-Length, ETag, Last-Modified; no checksum headers', async () => {
    const got = await getObject(door, main, key);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(SIMPLE);
    expect(got.headers['content-length']).toBe(String(SIMPLE.length));
    expect(got.headers.etag).toBe(`"${md5Hex(SIMPLE)}"`);
    expect(new Date(String(got.headers['last-modified'])).getTime()).not.toBeNaN();
    expectNoChecksumHeaders(got);

    const head = await call(door.srv, { method: 'HEAD', path: objectPath(key), creds: main });
    expect(head.status).toBe(200);
    expect(head.body.length).toBe(0);
    expect(head.headers['content-length']).toBe(String(SIMPLE.length));
    expect(head.headers.etag).toBe(`"${md5Hex(SIMPLE)}"`);
    expectNoChecksumHeaders(head);
  });

  it('GetObject with x-amz-checksum-mode: ENABLED (as Terraform sends it) works, whole and ranged', async () => {
    const got = await getObject(door, main, key, {
      headers: { 'x-amz-checksum-mode': 'ENABLED' },
    });
    expect(got.status).toBe(200);
    expect(got.body).toEqual(SIMPLE);
    expectNoChecksumHeaders(got);
    const ranged = await getObject(door, main, key, {
      headers: { 'x-amz-checksum-mode': 'ENABLED', range: 'bytes=0-5242879' },
      query: 'x-id=GetObject',
    });
    expect(ranged.status).toBe(206);
    expect(ranged.headers['content-range']).toBe(`bytes 0-${SIMPLE.length - 1}/${SIMPLE.length}`);
    expect(ranged.body).toEqual(SIMPLE);
    expectNoChecksumHeaders(ranged);
  });

  it('a request signed by @smithy/signature-v4 (the AWS SDK signer) is accepted too', async () => {
    const signer = new SignatureV4({
      service: 's3',
      region: REGION,
      credentials: {
        accessKeyId: main.AccessKeyId,
        secretAccessKey: main.SecretAccessKey,
        sessionToken: main.SessionToken,
      },
      sha256: NodeSha256,
      uriEscapePath: false,
      applyChecksum: false,
    });
    const signed = await signer.sign({
      method: 'GET',
      protocol: 'http:',
      hostname: '127.0.0.1',
      port: door.srv.port,
      path: objectPath(key),
      query: { 'x-id': 'GetObject' },
      headers: { host: `127.0.0.1:${door.srv.port}`, 'x-amz-content-sha256': EMPTY_SHA256 },
    });
    const r = await send(door.srv, {
      method: 'GET',
      path: objectPath(key),
      query: 'x-id=GetObject',
      headers: signed.headers,
    });
    expect(r.status).toBe(200);
    expect(r.body).toEqual(SIMPLE);
  });

  it('correct Content-MD5 and x-amz-checksum-{sha256,crc32} headers are accepted', async () => {
    const v2 = tfState(2, 'ok-checksums');
    const v3 = tfState(3, 'ok-checksums');
    const v4 = tfState(4, 'ok-checksums');
    const k = 'ok/checksums/terraform.tfstate';
    expect(
      (await putState(door, main, k, v2, { headers: { 'content-md5': md5B64(v2) } })).status,
    ).toBe(200);
    expect(
      (await putState(door, main, k, v3, { headers: { 'x-amz-checksum-sha256': sha256B64(v3) } }))
        .status,
    ).toBe(200);
    expect(
      (await putState(door, main, k, v4, { headers: { 'x-amz-checksum-crc32': crc32B64(v4) } }))
        .status,
    ).toBe(200);
    expect(await currentState(door, 'ok/checksums')).toEqual(v4);
  });

  it('aws-chunked with a trailing checksum (Terraform over https) stores exactly the decoded bytes', async () => {
    for (const [n, trailer] of [
      ['sha256', 'x-amz-checksum-sha256'],
      ['crc32', 'x-amz-checksum-crc32'],
    ] as const) {
      const data = stateOfSize(200_000, n === 'sha256' ? 1 : 2, 'ok-chunked');
      const value = n === 'sha256' ? sha256B64(data) : crc32B64(data);
      const r = await call(door.srv, {
        method: 'PUT',
        path: objectPath('ok/chunked/terraform.tfstate'),
        creds: main,
        payloadHash: 'STREAMING-UNSIGNED-PAYLOAD-TRAILER',
        headers: {
          'content-encoding': 'aws-chunked',
          'x-amz-decoded-content-length': String(data.length),
          'x-amz-trailer': trailer,
        },
        body: chunkedTrailer(data, 65536, { [trailer]: value }),
      });
      expect({ status: r.status, text: r.text }).toEqual({ status: 200, text: '' });
      expect(r.headers.etag).toBe(`"${md5Hex(data)}"`);
      expect(await currentState(door, 'ok/chunked')).toEqual(data);
    }
  });

  it('signed aws-chunked (STREAMING-AWS4-HMAC-SHA256-PAYLOAD) stores exactly the decoded bytes', async () => {
    const data = stateOfSize(150_000, 1, 'ok-signed-chunks');
    const r = await call(door.srv, {
      method: 'PUT',
      path: objectPath('ok/signed-chunks/terraform.tfstate'),
      creds: main,
      payloadHash: 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD',
      headers: {
        'content-encoding': 'aws-chunked',
        'x-amz-decoded-content-length': String(data.length),
      },
      body: (s) => chunkedSigned(s, data, 64 * 1024),
    });
    expect({ status: r.status, text: r.text }).toEqual({ status: 200, text: '' });
    expect(await currentState(door, 'ok/signed-chunks')).toEqual(data);
  });

  it('Expect: 100-continue on a 3 MiB PutObject is answered with 100, then 200', async () => {
    const data = stateOfSize(3 * MiB, 1, 'ok-expect');
    const path = objectPath('ok/expect/terraform.tfstate');
    const signed = sign(door.srv, { method: 'PUT', path, body: data, creds: main });
    const events: string[] = [];
    const r = await new Promise<Reply>((resolve, reject) => {
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port: door.srv.port,
          method: 'PUT',
          path,
          agent: false,
          headers: {
            ...signed.headers,
            'content-length': String(data.length),
            expect: '100-continue',
          },
        },
        (res) => {
          events.push(`response ${res.statusCode}`);
          const parts: Buffer[] = [];
          res.on('data', (c: Buffer) => parts.push(c));
          res.on('end', () => {
            const body = Buffer.concat(parts);
            resolve({
              status: res.statusCode ?? 0,
              headers: res.headers,
              body,
              text: body.toString(),
            });
          });
        },
      );
      const timer = setTimeout(() => {
        events.push('no 100 Continue within 5 s');
        req.destroy(new Error('no 100 Continue within 5 s'));
      }, 5000);
      req.on('continue', () => {
        clearTimeout(timer);
        events.push('continue');
        req.end(data);
      });
      req.on('error', reject);
      req.flushHeaders();
    });
    expect(events).toEqual(['continue', 'response 200']);
    expect(r.status).toBe(200);
    expect(((await currentState(door, 'ok/expect')) as Buffer).equals(data)).toBe(true);
  });

  it("x-amz-server-side-encryption is accepted (encryption at rest is the server's business) and echoed", async () => {
    const body = tfState(2, 'ok-sse');
    const r = await putState(door, main, 'ok/sse/terraform.tfstate', body, {
      headers: { 'x-amz-server-side-encryption': 'AES256' },
    });
    expect(r.status).toBe(200);
    expect(r.headers['x-amz-server-side-encryption']).toBe('AES256');
    expect(await currentState(door, 'ok/sse')).toEqual(body);
  });

  it('harmless bucket answers: ListBuckets, HeadBucket, GetBucketLocation', async () => {
    const list = await call(door.srv, { method: 'GET', path: '/s3', creds: main });
    expect(list.status).toBe(200);
    expect(list.text).toContain(`<Name>${BUCKET}</Name>`);
    const head = await call(door.srv, { method: 'HEAD', path: `/s3/${BUCKET}`, creds: main });
    expect(head.status).toBe(200);
    const loc = await call(door.srv, {
      method: 'GET',
      path: `/s3/${BUCKET}`,
      query: 'location',
      creds: main,
    });
    expect(loc.status).toBe(200);
    expect(loc.text).toContain('<LocationConstraint');
  });
});

describe('authentication: every broken signature or credential is refused, nothing stored', () => {
  const key = 'auth/app/terraform.tfstate';
  const unit = 'auth/app';
  const v1 = tfState(1, 'auth-lineage');
  const v2 = tfState(2, 'auth-lineage');

  beforeAll(async () => {
    expect((await putState(door, main, key, v1)).status).toBe(200);
  });

  it('anonymous requests: 403 AccessDenied (GET, HEAD without a body, PUT, list)', async () => {
    const anon = (method: string, path: string, query = '', body?: Buffer): Promise<Reply> =>
      send(door.srv, {
        method,
        path,
        query,
        headers: { host: `127.0.0.1:${door.srv.port}` },
        body,
      });
    expectS3Error(await anon('GET', objectPath(key)), 403, 'AccessDenied', {
      resource: objectPath(key),
      message: /Anonymous access is not allowed/,
    });
    expectS3Error(await anon('HEAD', objectPath(key)), 403, 'AccessDenied', { head: true });
    expectS3Error(await anon('GET', `/s3/${BUCKET}`, 'list-type=2'), 403, 'AccessDenied');
    expectS3Error(
      await refused(door, { unit }, () => anon('PUT', objectPath(key), '', v2)),
      403,
      'AccessDenied',
    );
  });

  it('a tampered signature: 403 SignatureDoesNotMatch, nothing stored', async () => {
    const r = await refused(door, { unit }, () =>
      putState(door, main, key, v2, {
        tamper: (o) => {
          o.headers.authorization = o.headers.authorization.replace(
            /Signature=([0-9a-f])/,
            (_m, c: string) => `Signature=${c === '0' ? '1' : '0'}`,
          );
          presented.add(/Signature=([0-9a-f]{64})/.exec(o.headers.authorization)?.[1] ?? '');
        },
      }),
    );
    expectS3Error(r, 403, 'SignatureDoesNotMatch', { resource: objectPath(key) });
    expectS3Error(
      await getObject(door, main, key, {
        tamper: (o) => {
          o.headers.authorization = o.headers.authorization.replace(/.$/, (c) =>
            c === 'a' ? 'b' : 'a',
          );
        },
      }),
      403,
      'SignatureDoesNotMatch',
    );
  });

  it('a tampered signed header, path or query: 403 SignatureDoesNotMatch, nothing stored', async () => {
    expectS3Error(
      await refused(door, { unit }, () =>
        putState(door, main, key, v2, {
          headers: { 'x-amz-meta-purpose': 'plan', 'content-type': 'application/json' },
          tamper: (o) => (o.headers['x-amz-meta-purpose'] = 'apply'),
        }),
      ),
      403,
      'SignatureDoesNotMatch',
    );
    expectS3Error(
      await refused(door, { unit }, () =>
        putState(door, main, key, v2, {
          headers: { 'content-type': 'application/json' },
          tamper: (o) => (o.headers['content-type'] = 'text/plain'),
        }),
      ),
      403,
      'SignatureDoesNotMatch',
    );
    // The signed x-amz-content-sha256 changed to the hash of another body.
    expectS3Error(
      await refused(door, { unit }, () =>
        putState(door, main, key, v2, {
          tamper: (o) => {
            o.headers['x-amz-content-sha256'] = sha256Hex(v1);
            o.body = v1;
          },
        }),
      ),
      403,
      'SignatureDoesNotMatch',
    );
    // Signed for one key, sent to another: neither is written.
    const elsewhere = 'auth/elsewhere/terraform.tfstate';
    expectS3Error(
      await refused(door, { unit: 'auth/elsewhere' }, () =>
        putState(door, main, key, v2, { tamper: (o) => (o.path = objectPath(elsewhere)) }),
      ),
      403,
      'SignatureDoesNotMatch',
    );
    expect(await currentState(door, unit)).toEqual(v1);
    expectS3Error(
      await getObject(door, main, key, {
        headers: { range: 'bytes=0-9' },
        tamper: (o) => (o.headers.range = 'bytes=0-99'),
      }),
      403,
      'SignatureDoesNotMatch',
    );
    expectS3Error(
      await call(door.srv, {
        method: 'GET',
        path: `/s3/${BUCKET}`,
        query: 'list-type=2&prefix=auth%2F',
        creds: main,
        tamper: (o) => (o.query = 'list-type=2&prefix=other%2F'),
      }),
      403,
      'SignatureDoesNotMatch',
    );
  });

  it('an x-amz-* header that is not signed: 403 AccessDenied naming it', async () => {
    expectS3Error(
      await refused(door, { unit }, () =>
        putState(door, main, key, v2, {
          tamper: (o) => (o.headers['x-amz-meta-extra'] = 'added after signing'),
        }),
      ),
      403,
      'AccessDenied',
      { message: 'x-amz-meta-extra' },
    );
  });

  it('a tampered body (hex x-amz-content-sha256 mismatch): 400 XAmzContentSHA256Mismatch, nothing stored', async () => {
    const forged = Buffer.from(v2);
    forged[forged.indexOf('"serial": 2') + 10] = 0x33; // serial 3, same length
    const r = await refused(door, { unit }, () =>
      putState(door, main, key, v2, { tamper: (o) => (o.body = forged) }),
    );
    expectS3Error(r, 400, 'XAmzContentSHA256Mismatch', { resource: objectPath(key) });
    expect(await currentState(door, unit)).toEqual(v1);
  });

  it('a tampered signed chunk (STREAMING-AWS4-HMAC-SHA256-PAYLOAD): 403 SignatureDoesNotMatch, nothing stored', async () => {
    const data = stateOfSize(100_000, 2, 'auth-lineage');
    const headers = {
      'content-encoding': 'aws-chunked',
      'x-amz-decoded-content-length': String(data.length),
    };
    // One data byte changed in the second chunk.
    const r = await refused(door, { unit }, () =>
      putState(door, main, key, data, {
        payloadHash: 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD',
        headers,
        body: (s) => {
          const b = chunkedSigned(s, data, 32 * 1024);
          const at = b.indexOf('\r\n', b.indexOf(';chunk-signature=', 40_000)) + 100;
          b[at] = b[at] === 0x78 ? 0x79 : 0x78;
          return b;
        },
      }),
    );
    expectS3Error(r, 403, 'SignatureDoesNotMatch');
    // A chunk signature not chained from the request's signature.
    const r2 = await refused(door, { unit }, () =>
      putState(door, main, key, data, {
        payloadHash: 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD',
        headers,
        body: (s) => chunkedSigned({ ...s, signature: '0'.repeat(64) }, data, 32 * 1024),
      }),
    );
    expectS3Error(r2, 403, 'SignatureDoesNotMatch');
  });

  it('no session token: 403 AccessDenied saying it is needed', async () => {
    expectS3Error(
      await refused(door, { unit }, () => putState(door, main, key, v2, { token: null })),
      403,
      'AccessDenied',
      { message: /session token/ },
    );
    expectS3Error(await getObject(door, main, key, { token: null }), 403, 'AccessDenied');
  });

  it("another principal's session token with my keys: 403 AccessDenied (the token's sid binds it to its keys)", async () => {
    expectS3Error(
      await refused(door, { unit }, () =>
        putState(door, main, key, v2, { token: other.SessionToken }),
      ),
      403,
      'AccessDenied',
      { message: /belongs to other credentials/ },
    );
  });

  it('an API token, an ordinary API access token or the bootstrap token as X-Amz-Security-Token: 403', async () => {
    for (const token of [mainToken, accessToken, door.srv.token]) {
      presented.add(token);
      const message = expectS3Error(
        await refused(door, { unit }, () => putState(door, main, key, v2, { token })),
        403,
        'AccessDenied',
        { message: /session token was refused/ },
      );
      expect(message).not.toContain(token);
    }
    // The access token is a real, valid token of this server — only not for S3.
    const me = await fetch(`${door.srv.url}/v1/auth/me`, {
      headers: { authorization: `Bearer ${accessToken}` },
    });
    expect(me.status).toBe(200);
  });

  it('expired credentials (an expired session token for these keys): 400 ExpiredToken, nothing stored', async () => {
    const now = Math.floor(Date.now() / 1000);
    const expired = await sessionToken(main, { iat: now - 3600, exp: now - 120 });
    presented.add(expired);
    expectS3Error(
      await refused(door, { unit }, () => putState(door, main, key, v2, { token: expired })),
      400,
      'ExpiredToken',
    );
    expectS3Error(await getObject(door, main, key, { token: expired }), 400, 'ExpiredToken');
    // The same token, still valid, is accepted: only its expiry made the difference.
    const valid = await sessionToken(main, { iat: now - 60, exp: now + 600 });
    presented.add(valid);
    expect((await getObject(door, main, key, { token: valid })).status).toBe(200);
  });

  it('a clock 20 minutes off (either way): 403 RequestTimeTooSkewed; 14 minutes is tolerated', async () => {
    for (const offset of [-20 * 60_000, 20 * 60_000]) {
      expectS3Error(
        await refused(door, { unit }, () =>
          putState(door, main, key, v2, { time: Date.now() + offset }),
        ),
        403,
        'RequestTimeTooSkewed',
      );
      expectS3Error(
        await getObject(door, main, key, { time: Date.now() + offset }),
        403,
        'RequestTimeTooSkewed',
      );
    }
    expect((await getObject(door, main, key, { time: Date.now() - 14 * 60_000 })).status).toBe(200);
  });

  it('an unknown access key id: 403 InvalidAccessKeyId', async () => {
    for (const id of ['SHZZ' + 'A'.repeat(26), 'AKIAIOSFODNN7EXAMPLE']) {
      expectS3Error(
        await refused(door, { unit }, () => putState(door, main, key, v2, { accessKeyId: id })),
        403,
        'InvalidAccessKeyId',
      );
    }
  });

  it('a presigned URL past X-Amz-Expires: 403 AccessDenied; one within it works', async () => {
    const fresh = await send(door.srv, {
      method: 'GET',
      ...splitUrl(presign(door.srv, { path: objectPath(key), creds: main, expires: 300 })),
      headers: { host: `127.0.0.1:${door.srv.port}` },
    });
    expect(fresh.status).toBe(200);
    expect(fresh.body).toEqual(v1);
    const stale = await send(door.srv, {
      method: 'GET',
      ...splitUrl(
        presign(door.srv, {
          path: objectPath(key),
          creds: main,
          expires: 60,
          time: Date.now() - 10 * 60_000,
        }),
      ),
      headers: { host: `127.0.0.1:${door.srv.port}` },
    });
    expectS3Error(stale, 403, 'AccessDenied', { message: 'Request has expired' });
    const tooLong = await send(door.srv, {
      method: 'GET',
      ...splitUrl(presign(door.srv, { path: objectPath(key), creds: main, expires: 604801 })),
      headers: { host: `127.0.0.1:${door.srv.port}` },
    });
    expectS3Error(tooLong, 403, 'AccessDenied');
    // A presigned URL carrying another principal's session token.
    const foreign = await send(door.srv, {
      method: 'GET',
      ...splitUrl(
        presign(door.srv, {
          path: objectPath(key),
          creds: main,
          expires: 300,
          token: other.SessionToken,
        }),
      ),
      headers: { host: `127.0.0.1:${door.srv.port}` },
    });
    expectS3Error(foreign, 403, 'AccessDenied', { message: /belongs to other credentials/ });
  });
});

function splitUrl(pathAndQuery: string): { path: string; query: string } {
  const q = pathAndQuery.indexOf('?');
  return { path: pathAndQuery.slice(0, q), query: pathAndQuery.slice(q + 1) };
}

describe('body integrity: every mismatch is refused and nothing is stored', () => {
  const key = 'integrity/app/terraform.tfstate';
  const unit = 'integrity/app';
  const v1 = tfState(1, 'integrity');
  const v2 = tfState(2, 'integrity');

  beforeAll(async () => {
    expect((await putState(door, main, key, v1)).status).toBe(200);
  });

  it('Content-MD5 mismatch: 400 BadDigest', async () => {
    expectS3Error(
      await refused(door, { unit }, () =>
        putState(door, main, key, v2, { headers: { 'content-md5': md5B64(v1) } }),
      ),
      400,
      'BadDigest',
    );
  });

  it('x-amz-checksum-sha256 / x-amz-checksum-crc32 header mismatch: 400 BadDigest', async () => {
    expectS3Error(
      await refused(door, { unit }, () =>
        putState(door, main, key, v2, { headers: { 'x-amz-checksum-sha256': sha256B64(v1) } }),
      ),
      400,
      'BadDigest',
    );
    expectS3Error(
      await refused(door, { unit }, () =>
        putState(door, main, key, v2, { headers: { 'x-amz-checksum-crc32': crc32B64(v1) } }),
      ),
      400,
      'BadDigest',
    );
  });

  const chunkedPut = (
    body: Buffer,
    decodedLength: number,
    trailer = 'x-amz-checksum-crc32',
  ): Promise<Reply> =>
    putState(door, main, key, body, {
      payloadHash: 'STREAMING-UNSIGNED-PAYLOAD-TRAILER',
      headers: {
        'content-encoding': 'aws-chunked',
        'x-amz-decoded-content-length': String(decodedLength),
        'x-amz-trailer': trailer,
      },
    });

  it('a wrong trailing checksum (x-amz-checksum-crc32 trailer): 400 BadDigest', async () => {
    const body = chunkedTrailer(v2, 100, { 'x-amz-checksum-crc32': crc32B64(v1) });
    expectS3Error(
      await refused(door, { unit }, () => chunkedPut(body, v2.length)),
      400,
      'BadDigest',
    );
    const sha = chunkedTrailer(v2, 100, { 'x-amz-checksum-sha256': sha256B64(v1) });
    expectS3Error(
      await refused(door, { unit }, () => chunkedPut(sha, v2.length, 'x-amz-checksum-sha256')),
      400,
      'BadDigest',
    );
  });

  it('malformed aws-chunked framing: 400 with the right code, nothing stored', async () => {
    // A valid write (serial 2 after 1) in 256-byte chunks: each case breaks it in one place.
    const data = stateOfSize(1000, 2, 'integrity');
    const good = chunkedTrailer(data, 256, { 'x-amz-checksum-crc32': crc32B64(data) });
    const text = good.toString('latin1');
    const edit = (from: string | RegExp, to: string): Buffer => {
      const out = Buffer.from(text.replace(from, to), 'latin1');
      expect(out.equals(good)).toBe(false);
      return out;
    };
    const cases: { name: string; body: Buffer; decoded?: number; code: string }[] = [
      {
        name: 'a chunk size that is not hex',
        body: edit(/^100\r\n/, 'zzz\r\n'),
        code: 'InvalidArgument',
      },
      {
        name: 'no CRLF after the chunk data',
        body: edit('\r\n100\r\n', 'XX100\r\n'),
        code: 'InvalidArgument',
      },
      {
        name: 'more data than x-amz-decoded-content-length',
        body: good,
        decoded: data.length - 10,
        code: 'InvalidArgument',
      },
      {
        name: 'fewer bytes than declared, then the body ends',
        body: good,
        decoded: data.length + 10,
        code: 'IncompleteBody',
      },
      {
        name: 'the body cut short (no final chunk)',
        body: good.subarray(0, 600),
        code: 'IncompleteBody',
      },
      {
        name: 'bytes after the end',
        body: Buffer.concat([good, Buffer.from('5\r\nextra\r\n')]),
        code: 'InvalidArgument',
      },
      {
        name: 'an undeclared trailer',
        body: chunkedTrailer(data, 256, {
          'x-amz-checksum-crc32': crc32B64(data),
          'x-amz-checksum-sha256': sha256B64(data),
        }),
        code: 'InvalidRequest',
      },
      {
        name: 'the declared trailer missing',
        body: chunkedTrailer(data, 256, {}),
        code: 'InvalidRequest',
      },
    ];
    // Every case is run and reported (status, code, whether anything was stored) before the
    // comparison, so one failure does not hide the others.
    const got: Record<string, string> = {};
    const want: Record<string, string> = {};
    for (const c of cases) {
      const before = await snapshot(door, unit);
      const r = await chunkedPut(c.body, c.decoded ?? data.length);
      const changed = JSON.stringify(await snapshot(door, unit)) !== JSON.stringify(before);
      const code = /<Code>([^<]*)<\/Code>/.exec(r.text)?.[1];
      got[c.name] = `${r.status} ${code ?? r.text}${changed ? ' (STORED)' : ''}`;
      want[c.name] = `400 ${c.code}`;
      if (code !== undefined) expectS3Error(r, r.status, code);
    }
    expect(got).toEqual(want);
    expect(await currentState(door, unit)).toEqual(v1);
  });
});

describe('oversized bodies (STATEHOUSE_MAX_STATE_BYTES=64KiB): 400 EntityTooLarge, nothing stored', () => {
  const LIMIT = 64 * 1024;
  const key = 'size/app/terraform.tfstate';
  const unit = 'size/app';

  it('a state of exactly the limit is accepted', async () => {
    const r = await putState(small, smallCreds, key, stateOfSize(LIMIT, 1, 'size'));
    expect(r.status).toBe(200);
  });

  it('one byte more, declared by Content-Length, is refused', async () => {
    const r = await refused(small, { unit }, () =>
      putState(small, smallCreds, key, stateOfSize(LIMIT + 1, 2, 'size')),
    );
    expectS3Error(r, 400, 'EntityTooLarge', { resource: objectPath(key) });
  });

  it('an aws-chunked body that declares (and sends) more than the limit is refused', async () => {
    const data = stateOfSize(LIMIT + 4096, 2, 'size');
    const r = await refused(small, { unit }, () =>
      putState(small, smallCreds, key, data, {
        payloadHash: 'STREAMING-UNSIGNED-PAYLOAD-TRAILER',
        headers: {
          'content-encoding': 'aws-chunked',
          'x-amz-decoded-content-length': String(data.length),
          'x-amz-trailer': 'x-amz-checksum-sha256',
        },
        body: chunkedTrailer(data, 8192, { 'x-amz-checksum-sha256': sha256B64(data) }),
      }),
    );
    expectS3Error(r, 400, 'EntityTooLarge');
  });

  it('a body sent with Transfer-Encoding: chunked (no length known up front) is cut off at the limit', async () => {
    const data = stateOfSize(LIMIT * 3, 2, 'size');
    const r = await refused(small, { unit }, () =>
      putState(small, smallCreds, key, data, {
        tamper: (o) => (o.headers['transfer-encoding'] = 'chunked'),
      }),
    );
    expectS3Error(r, 400, 'EntityTooLarge');
  });

  it('a multipart part larger than the limit is refused, and the upload stays empty', async () => {
    const create = await call(small.srv, {
      method: 'POST',
      path: objectPath('size/multipart/terraform.tfstate'),
      query: 'uploads',
      creds: smallCreds,
    });
    expect(create.status).toBe(200);
    const uploadId = /<UploadId>([^<]+)<\/UploadId>/.exec(create.text)?.[1] as string;
    const part = Buffer.alloc(LIMIT + 1, 0x61);
    const r = await refused(small, { unit: 'size/multipart' }, () =>
      call(small.srv, {
        method: 'PUT',
        path: objectPath('size/multipart/terraform.tfstate'),
        query: `partNumber=1&uploadId=${encodeURIComponent(uploadId)}`,
        body: part,
        creds: smallCreds,
      }),
    );
    expectS3Error(r, 400, 'EntityTooLarge');
    const parts = await call(small.srv, {
      method: 'GET',
      path: objectPath('size/multipart/terraform.tfstate'),
      query: `uploadId=${encodeURIComponent(uploadId)}`,
      creds: smallCreds,
    });
    expect(parts.status).toBe(200);
    expect(parts.text).not.toContain('<Part>');
  });
});

describe('keys, buckets and operations outside the door', () => {
  it('keys with .. or . or empty segments, or not naming a state: 400 InvalidArgument, nothing stored', async () => {
    const body = tfState(1, 'bad-keys');
    const paths = [
      `/s3/${BUCKET}/team/../app/terraform.tfstate`,
      `/s3/${BUCKET}/team/%2E%2E/app/terraform.tfstate`,
      `/s3/${BUCKET}/team/..%2Fapp/terraform.tfstate`,
      `/s3/${BUCKET}/team/./app/terraform.tfstate`,
      `/s3/${BUCKET}/../terraform.tfstate`,
      `/s3/${BUCKET}/team//app/terraform.tfstate`,
      `/s3/${BUCKET}//team/terraform.tfstate`,
      `/s3/${BUCKET}/team/app/`,
      `/s3/${BUCKET}/team/app/state.json`,
      `/s3/${BUCKET}/team/app`,
      `/s3/${BUCKET}/terraform.tfstate`,
      `/s3/${BUCKET}/team/app.tfstate/terraform.tfstate`,
      `/s3/${BUCKET}/env%3A/default/team/terraform.tfstate`,
      `/s3/${BUCKET}/env%3A//team/terraform.tfstate`,
      `/s3/${BUCKET}/team/../x/terraform.tfstate.tflock`,
    ];
    for (const path of paths) {
      const lock = path.endsWith('.tflock');
      const r = await refused(door, {}, () =>
        call(door.srv, {
          method: 'PUT',
          path,
          body: lock ? Buffer.from(lockInfo(randomUUID(), 'x')) : body,
          headers: lock ? { 'if-none-match': '*' } : {},
          creds: main,
        }),
      );
      expectS3Error(r, 400, 'InvalidArgument', { resource: path, message: /Invalid state key/ });
      // Reads of such keys are refused the same way (never NoSuchKey).
      expectS3Error(
        await call(door.srv, { method: 'GET', path, creds: main }),
        400,
        'InvalidArgument',
      );
    }
  });

  it('an unknown bucket: 404 NoSuchBucket, nothing stored', async () => {
    const path = '/s3/other-bucket/team/app/terraform.tfstate';
    expectS3Error(
      await refused(door, { unit: 'team/app' }, () =>
        call(door.srv, { method: 'PUT', path, body: tfState(1, 'nb'), creds: main }),
      ),
      404,
      'NoSuchBucket',
      { resource: path },
    );
    expectS3Error(await call(door.srv, { method: 'GET', path, creds: main }), 404, 'NoSuchBucket');
    expectS3Error(
      await call(door.srv, { method: 'HEAD', path, creds: main }),
      404,
      'NoSuchBucket',
      { head: true },
    );
    expectS3Error(
      await call(door.srv, {
        method: 'GET',
        path: '/s3/other-bucket',
        query: 'list-type=2',
        creds: main,
      }),
      404,
      'NoSuchBucket',
    );
  });

  it('unsupported operations: 501 NotImplemented (never 500), nothing stored', async () => {
    const obj = objectPath('ops/app/terraform.tfstate');
    const bucket = `/s3/${BUCKET}`;
    const body = tfState(1, 'ops');
    const cases: {
      name: string;
      method: string;
      path: string;
      query?: string;
      body?: Buffer;
      headers?: Record<string, string>;
    }[] = [
      { name: 'GetObjectAcl', method: 'GET', path: obj, query: 'acl' },
      {
        name: 'PutObjectAcl',
        method: 'PUT',
        path: obj,
        query: 'acl',
        body: Buffer.from('<AccessControlPolicy/>'),
      },
      { name: 'GetObjectTagging', method: 'GET', path: obj, query: 'tagging' },
      {
        name: 'PutObjectTagging',
        method: 'PUT',
        path: obj,
        query: 'tagging',
        body: Buffer.from('<Tagging/>'),
      },
      { name: 'DeleteObjectTagging', method: 'DELETE', path: obj, query: 'tagging' },
      { name: 'GetObjectAttributes', method: 'GET', path: obj, query: 'attributes' },
      {
        name: 'PutObjectRetention',
        method: 'PUT',
        path: obj,
        query: 'retention',
        body: Buffer.from('<Retention/>'),
      },
      { name: 'GetObject of a versionId', method: 'GET', path: obj, query: 'versionId=3' },
      {
        name: 'SelectObjectContent',
        method: 'POST',
        path: obj,
        query: 'select&select-type=2',
        body: Buffer.from('<x/>'),
      },
      {
        name: 'RestoreObject',
        method: 'POST',
        path: obj,
        query: 'restore',
        body: Buffer.from('<x/>'),
      },
      { name: 'POST on an object', method: 'POST', path: obj, body },
      {
        name: 'CopyObject',
        method: 'PUT',
        path: obj,
        headers: { 'x-amz-copy-source': `/${BUCKET}/ok/app/terraform.tfstate` },
      },
      { name: 'ListObjectVersions', method: 'GET', path: bucket, query: 'versions' },
      { name: 'ListMultipartUploads', method: 'GET', path: bucket, query: 'uploads' },
      { name: 'GetBucketAcl', method: 'GET', path: bucket, query: 'acl' },
      { name: 'GetBucketPolicy', method: 'GET', path: bucket, query: 'policy' },
      {
        name: 'DeleteObjects',
        method: 'POST',
        path: bucket,
        query: 'delete',
        body: Buffer.from('<Delete/>'),
      },
      {
        name: 'PutBucketVersioning',
        method: 'PUT',
        path: bucket,
        query: 'versioning',
        body: Buffer.from('<x/>'),
      },
      { name: 'DeleteBucket', method: 'DELETE', path: bucket },
      { name: 'POST on the service', method: 'POST', path: '/s3', body: Buffer.from('x') },
    ];
    const got: Record<string, string> = {};
    for (const c of cases) {
      const r = await refused(door, { unit: 'ops/app' }, () =>
        call(door.srv, {
          method: c.method,
          path: c.path,
          query: c.query,
          body: c.body,
          headers: c.headers,
          creds: main,
        }),
      );
      got[c.name] = `${r.status} ${/<Code>([^<]*)<\/Code>/.exec(r.text)?.[1] ?? r.text}`;
      if (r.status === 501) expectS3Error(r, 501, 'NotImplemented', { resource: c.path });
    }
    expect(got).toEqual(Object.fromEntries(cases.map((c) => [c.name, '501 NotImplemented'])));

    expectS3Error(
      await call(door.srv, { method: 'PATCH', path: obj, body, creds: main }),
      405,
      'MethodNotAllowed',
    );
  });
});

describe('refused writes: not a state, the serial guard, another principal’s lock', () => {
  const key = 'writes/app/terraform.tfstate';
  const unit = 'writes/app';
  const lineage = 'writes-lineage';

  beforeAll(async () => {
    expect((await putState(door, main, key, tfState(1, lineage))).status).toBe(200);
    expect((await putState(door, main, key, tfState(2, lineage))).status).toBe(200);
  });

  it('a body that is not a state: 400 InvalidArgument, nothing stored', async () => {
    const why: Record<string, RegExp> = {
      'not json at all': /not valid JSON/,
      'hello, also not JSON': /not valid JSON|unexpected/,
      '{"hello":"world"}': /no "version"/,
      '[1,2,3]': /must be a JSON object \(got an array\)/,
      '': /body is empty/,
    };
    const messages: Record<string, string> = {};
    for (const body of Object.keys(why)) {
      const r = await refused(door, { unit }, () => putState(door, main, key, Buffer.from(body)));
      messages[body] = expectS3Error(r, 400, 'InvalidArgument');
    }
    // Also for a unit that does not exist yet: it is not created.
    const r = await refused(door, { unit: 'writes/new' }, () =>
      putState(door, main, 'writes/new/terraform.tfstate', Buffer.from('{"hello":"world"}')),
    );
    expectS3Error(r, 400, 'InvalidArgument');
    // Each message says exactly why (a body that is not JSON must not be reported as a JSON
    // value of the wrong type).
    expect(messages).toEqual(
      Object.fromEntries(Object.entries(why).map(([b, re]) => [b, expect.stringMatching(re)])),
    );
  });

  it('the serial guard: 409 OperationAborted saying why, nothing stored; identical bytes are no new version', async () => {
    const older = await refused(door, { unit }, () =>
      putState(door, main, key, tfState(1, lineage, 'other bytes')),
    );
    expectS3Error(older, 409, 'OperationAborted', {
      message: `serial 1 is older than the current serial 2 of lineage ${lineage}`,
    });
    const same = await refused(door, { unit }, () =>
      putState(door, main, key, tfState(2, lineage, 'different content')),
    );
    expectS3Error(same, 409, 'OperationAborted', {
      message: 'serial 2 is already stored with different content',
    });
    const before = await snapshot(door, unit);
    const identical = await putState(door, main, key, tfState(2, lineage));
    expect(identical.status).toBe(200);
    expect(await snapshot(door, unit)).toEqual(before);
  });

  it("a write under another principal's lock: 409 OperationAborted naming the holder, nothing stored", async () => {
    const lockKey = `${key}.tflock`;
    const info = lockInfo(randomUUID(), key);
    const taken = await call(door.srv, {
      method: 'PUT',
      path: objectPath(lockKey),
      body: Buffer.from(info),
      headers: { 'if-none-match': '*' },
      creds: other,
    });
    expect(taken.status).toBe(200);
    expectNoChecksumHeaders(taken);
    try {
      const r = await refused(door, { unit }, () => putState(door, main, key, tfState(3, lineage)));
      expectS3Error(r, 409, 'OperationAborted', { message: 'locked by svc:door-other' });
      const conflict = await call(door.srv, {
        method: 'PUT',
        path: objectPath(lockKey),
        body: Buffer.from(lockInfo(randomUUID(), key)),
        headers: { 'if-none-match': '*' },
        creds: main,
      });
      expectS3Error(conflict, 412, 'PreconditionFailed');
      const held = await getObject(door, main, lockKey);
      expect(held.status).toBe(200);
      expect(held.text).toBe(info);
    } finally {
      const released = await call(door.srv, {
        method: 'DELETE',
        path: objectPath(lockKey),
        creds: other,
      });
      expect(released.status).toBe(204);
    }
  });
});

/**
 * "403, never NoSuchKey, for what the caller may not read": a caller who may not read a state
 * must get AccessDenied whether or not it exists, and the answers must not tell the two apart.
 * Until RBAC lands, every authenticated principal may read every unit, so the callers who may
 * not read are those whose authentication fails; with RBAC this becomes a matrix of principals
 * × (existing, missing, locked) states × (GET, HEAD, GET of the lock object, ListObjectsV2).
 */
describe('access answers: existence never leaks to a caller who may not read', () => {
  const existing = 'access/exists/terraform.tfstate';
  const missing = 'access/missing/terraform.tfstate';

  beforeAll(async () => {
    expect((await putState(door, main, existing, tfState(1, 'access'))).status).toBe(200);
  });

  /** Callers who may not read (for now: those whose authentication fails), and their answer. */
  const callers = (): { name: string; code: string; extra: Partial<CallInput> }[] => [
    { name: 'no session token', code: 'AccessDenied', extra: { token: null } },
    {
      name: "another principal's session token",
      code: 'AccessDenied',
      extra: { token: other.SessionToken },
    },
    { name: 'an API token as session token', code: 'AccessDenied', extra: { token: mainToken } },
    {
      name: 'a bad signature',
      code: 'SignatureDoesNotMatch',
      extra: {
        tamper: (o) => {
          o.headers.authorization = o.headers.authorization.replace(/.$/, (c) =>
            c === 'a' ? 'b' : 'a',
          );
        },
      },
    },
  ];

  it('the same 403 for an existing and a missing state (GET, HEAD, lock object)', async () => {
    for (const c of callers()) {
      for (const method of ['GET', 'HEAD'] as const) {
        const answers: string[] = [];
        for (const key of [existing, missing, `${existing}.tflock`, `${missing}.tflock`]) {
          const r = await call(door.srv, {
            method,
            path: objectPath(key),
            creds: main,
            ...c.extra,
          });
          const message = expectS3Error(r, 403, c.code, { head: method === 'HEAD' });
          answers.push(`${r.status} ${message}`);
        }
        // Identical answers: nothing tells an existing state from a missing one.
        expect(new Set(answers).size).toBe(1);
      }
    }
  });

  it('HEAD errors carry no body at all (read off the socket)', async () => {
    const signed = sign(door.srv, {
      method: 'HEAD',
      path: objectPath(missing),
      creds: main,
      token: null,
    });
    const denied = await rawHead(door.srv, objectPath(missing), signed.headers);
    expect(denied.head).toMatch(/^HTTP\/1\.1 403 /);
    expect(denied.after.length).toBe(0);
    const ok = sign(door.srv, { method: 'HEAD', path: objectPath(missing), creds: main });
    const notFound = await rawHead(door.srv, objectPath(missing), ok.headers);
    expect(notFound.head).toMatch(/^HTTP\/1\.1 404 /);
    expect(notFound.after.length).toBe(0);
  });

  it('a reader gets 404 NoSuchKey only for a readable name with no state (and its unheld lock)', async () => {
    expectS3Error(await getObject(door, main, missing), 404, 'NoSuchKey', {
      resource: objectPath(missing),
    });
    expectS3Error(
      await call(door.srv, { method: 'HEAD', path: objectPath(missing), creds: main }),
      404,
      'NoSuchKey',
      { head: true },
    );
    expectS3Error(await getObject(door, main, `${existing}.tflock`), 404, 'NoSuchKey', {
      message: 'is not locked',
    });
    expect((await getObject(door, main, existing)).status).toBe(200);
  });

  it('force-unlock (DELETE of a lock held by another) needs the right: 403 AccessDenied, lock kept', async () => {
    const lockKey = `${existing}.tflock`;
    const info = lockInfo(randomUUID(), existing);
    expect(
      (
        await call(door.srv, {
          method: 'PUT',
          path: objectPath(lockKey),
          body: Buffer.from(info),
          headers: { 'if-none-match': '*' },
          creds: main,
        })
      ).status,
    ).toBe(200);
    expectS3Error(
      await call(door.srv, { method: 'DELETE', path: objectPath(lockKey), creds: other }),
      403,
      'AccessDenied',
      { message: 'svc:door-other may not unit.force-unlock' },
    );
    expect((await getObject(door, other, lockKey)).text).toBe(info);
    // (A force-unlock by a principal with the right: s3-clients.spec.ts. bootstrap-admin, which
    // needs no right, mints no S3 credentials.) The holder releases it.
    expect(
      (await call(door.srv, { method: 'DELETE', path: objectPath(lockKey), creds: main })).status,
    ).toBe(204);
    expectS3Error(await getObject(door, main, lockKey), 404, 'NoSuchKey');
  });
});

describe('secrets never reach the logs', () => {
  it('no secret access key, session token, API token or signature appears in either server output', () => {
    const outputs = door.srv.output() + small.srv.output();
    expect(presented.size).toBeGreaterThan(50);
    for (const secret of presented) {
      if (secret === '') continue;
      expect(outputs).not.toContain(secret);
      for (const part of secret.split('.')) {
        if (part.length >= 16) expect(outputs).not.toContain(part);
      }
    }
    expect(outputs).not.toMatch(/Signature=[0-9a-f]{64}/);
    expect(outputs).not.toMatch(/chunk-signature=[0-9a-f]{64}/);
    // Presigned requests are logged, their credentials redacted.
    expect(door.srv.output()).toContain('X-Amz-Signature=[redacted]');
  });
});

describe('credentials that really expire (STATEHOUSE_STS_TTL=60s)', () => {
  it('after their expiry (plus the 30 s token clock tolerance): 400 ExpiredToken, nothing stored', async () => {
    const claims = JSON.parse(
      Buffer.from(smallCreds.SessionToken.split('.')[1], 'base64url').toString(),
    ) as { iat: number; exp: number };
    expect(claims.exp - claims.iat).toBe(60);
    expect(Date.parse(smallCreds.Expiration) / 1000).toBeCloseTo(claims.exp, -1);
    await sleep(Math.max(0, (claims.exp + 31) * 1000 - Date.now()));
    const key = 'size/app/terraform.tfstate';
    expectS3Error(
      await refused(small, { unit: 'size/app' }, () =>
        putState(small, smallCreds, key, stateOfSize(1000, 9, 'size')),
      ),
      400,
      'ExpiredToken',
    );
    expectS3Error(await getObject(small, smallCreds, key), 400, 'ExpiredToken');
  }, 150_000);
});
