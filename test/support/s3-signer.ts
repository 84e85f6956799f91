import { SignatureV4 } from '@smithy/signature-v4';
import type { Checksum, SourceData } from '@smithy/types';
import { createHash, createHmac, Hash, Hmac } from 'node:crypto';
import { Agent, IncomingHttpHeaders, request as httpRequest } from 'node:http';
import { connect } from 'node:net';

/**
 * Requests to the `/s3` door signed the way the AWS SDKs sign them (`@smithy/signature-v4`, with
 * node:crypto as its SHA-256), kept as plain data so a test can send the very same bytes twice
 * (a captured request, replayed).
 */
export interface S3Creds {
  AccessKeyId: string;
  SecretAccessKey: string;
  SessionToken: string;
}

export interface RawRequest {
  method: string;
  /** Path and query exactly as sent. */
  target: string;
  headers: Record<string, string>;
  body?: Buffer;
}

export interface RawReply {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  /** Whether the request went out on a kept-alive connection used before. */
  reusedSocket: boolean;
}

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

/**
 * A header-signed request to `/s3/tfstate/<key>` (x-amz-content-sha256 of the body) — or below
 * another `base` (`''`: the root of the S3 door's own listener) and `bucket`; an empty key is the
 * bucket itself (`/tfstate`), no bucket the service (`/`).
 */
export async function signS3(
  port: number,
  creds: S3Creds,
  r: {
    method: string;
    key: string;
    query?: Record<string, string>;
    headers?: Record<string, string>;
    body?: Buffer;
    time?: Date;
    base?: string;
    bucket?: string;
    /** The Host header signed and sent (default 127.0.0.1:<port>). */
    host?: string;
  },
): Promise<RawRequest> {
  const signer = signerFor(creds);
  const body = r.body ?? Buffer.alloc(0);
  const bucket = r.bucket ?? 'tfstate';
  const key = r.key === '' ? '' : `/${r.key.split('/').map(encodeURIComponent).join('/')}`;
  const path = `${r.base ?? '/s3'}${bucket === '' ? '' : `/${bucket}`}${key}` || '/';
  const signed = await signer.sign(
    {
      method: r.method,
      protocol: 'http:',
      hostname: '127.0.0.1',
      port,
      path,
      query: r.query ?? {},
      headers: {
        host: r.host ?? `127.0.0.1:${port}`,
        'x-amz-content-sha256': createHash('sha256').update(body).digest('hex'),
        ...(r.body !== undefined ? { 'content-length': String(body.length) } : {}),
        ...r.headers,
      },
    },
    { signingDate: r.time ?? new Date() },
  );
  const query = Object.entries(r.query ?? {})
    .map(([k, v]) =>
      v === '' ? encodeURIComponent(k) : `${encodeURIComponent(k)}=${encodeURIComponent(v)}`,
    )
    .join('&');
  return {
    method: r.method,
    target: query === '' ? path : `${path}?${query}`,
    headers: { ...signed.headers },
    body: r.body,
  };
}

/** The SigV4 signer of an AWS SDK for `creds` (us-east-1, S3's unescaped paths). */
function signerFor(creds: S3Creds, applyChecksum = true): SignatureV4 {
  return new SignatureV4({
    service: 's3',
    region: 'us-east-1',
    sha256: NodeSha256,
    uriEscapePath: false,
    applyChecksum,
    credentials: {
      accessKeyId: creds.AccessKeyId,
      secretAccessKey: creds.SecretAccessKey,
      sessionToken: creds.SessionToken,
    },
  });
}

/**
 * A presigned GetObject of `/s3/tfstate/<key>` (the session token in the query, as
 * @aws-sdk/s3-request-presigner makes it): the path and query to send with no headers of note.
 */
export async function presignS3Get(port: number, creds: S3Creds, key: string): Promise<string> {
  const path = `/s3/tfstate/${key.split('/').map(encodeURIComponent).join('/')}`;
  const { query } = await signerFor(creds, false).presign(
    {
      method: 'GET',
      protocol: 'http:',
      hostname: '127.0.0.1',
      port,
      path,
      query: { 'x-id': 'GetObject' },
      headers: { host: `127.0.0.1:${port}`, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' },
    },
    { expiresIn: 900 },
  );
  const strict = (v: string) =>
    encodeURIComponent(v).replace(
      /[!'()*]/g,
      (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
    );
  const pairs = Object.entries(query ?? {}).map(([k, v]) => `${strict(k)}=${strict(String(v))}`);
  return `${path}?${pairs.join('&')}`;
}

/** Sends a request exactly as given (its own connection, unless an agent is given). */
export function sendRaw(port: number, r: RawRequest, agent?: Agent): Promise<RawReply> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        method: r.method,
        path: r.target,
        headers: r.headers,
        agent: agent ?? false,
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('error', reject);
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            text: Buffer.concat(parts).toString(),
            reusedSocket: req.reusedSocket,
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(r.body);
  });
}

/**
 * Sends requests one after the other on ONE connection without waiting (HTTP/1.1 pipelining)
 * and reads the answers: a server that answers a request before reading its whole body must
 * drain the rest, or the next request on the connection is never read. Resolves with the
 * statuses and bodies of the answers received before the connection closed or `timeoutMs`.
 */
export function pipelined(
  port: number,
  requests: RawRequest[],
  timeoutMs = 30_000,
): Promise<{ status: number; text: string }[]> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let data = Buffer.alloc(0);
    const answers: { status: number; text: string }[] = [];
    const finish = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(answers);
    };
    const timer = setTimeout(finish, timeoutMs);
    socket.on('error', (e) => (answers.length > 0 ? finish() : reject(e)));
    socket.on('close', finish);
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      for (;;) {
        const end = data.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = data.subarray(0, end).toString('latin1');
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (data.length < end + 4 + length) return;
        answers.push({
          status: Number(head.slice(9, 12)),
          text: data.subarray(end + 4, end + 4 + length).toString(),
        });
        data = data.subarray(end + 4 + length);
        if (answers.length === requests.length) return finish();
      }
    });
    for (const r of requests) {
      const headers = { ...r.headers, 'content-length': String(r.body?.length ?? 0) };
      const lines = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`);
      socket.write(`${r.method} ${r.target} HTTP/1.1\r\n${lines.join('')}\r\n`, 'latin1');
      if (r.body) socket.write(r.body);
    }
  });
}

/** The `<Code>` of an S3 XML error body. */
export function s3Code(text: string): string | undefined {
  return /<Code>([^<]*)<\/Code>/.exec(text)?.[1];
}
