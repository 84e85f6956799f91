/**
 * The S3 door on a listener of its own (STATEHOUSE_S3_PORT), against the real `statehouse serve`
 * process: `/<bucket>/<key>` at its root with the same authentication as `/s3` on the main port
 * (SigV4 over the path exactly as received, never rewritten), nothing but the S3 door there, and
 * what S3 clients with their own defaults send first — CreateBucket, GetBucketLocation,
 * ListObjects (v1), ListBuckets with real creation times — on both bases. Requests are signed
 * here (`@smithy/signature-v4`) and sent byte for byte with node:http.
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { connect } from 'node:net';
import { join } from 'node:path';
import { freshServerEnv } from '../support/database';
import { FIXTURES } from '../support/paths';
import { parseExposition, valueOf } from '../support/metrics';
import { portIsFree } from '../support/processes';
import { RawReply, S3Creds, s3Code, sendRaw, signS3 } from '../support/s3-signer';
import {
  apiFetch,
  RunningServer,
  s3CredentialsFor,
  spawnServer,
  unitVersions,
} from '../support/server';
import { tfStateBytes } from '../support/tf-state';

jest.setTimeout(120_000);

const SIMPLE = readFileSync(join(FIXTURES, 'simple.tfstate'));
const MiB = 1024 * 1024;
const METRICS_TOKEN = 'metrics-token-for-the-s3-port-test';

let server: RunningServer;
let env: Record<string, string>;
let cleanup: () => Promise<void>;
let creds: S3Creds;
let startedAt: number;
let listenedAt: number;
/** ListBuckets' CreationDate of the bucket, as first seen. */
let creationDate: string | undefined;

function tfState(serial: number, lineage: string, pad = ''): Buffer {
  return tfStateBytes({ serial, lineage, outputs: pad === '' ? {} : { pad }, checkResults: false });
}

const api = (path: string, init?: RequestInit): Promise<Response> => apiFetch(server, path, init);

type Signed = Parameters<typeof signS3>[2];

/** Signs (with a per-call id, as SDKs do) and sends to `port`. */
async function s3(port: number, r: Signed): Promise<RawReply> {
  return sendRaw(
    port,
    await signS3(port, creds, {
      ...r,
      headers: { 'amz-sdk-invocation-id': randomUUID(), ...r.headers },
    }),
  );
}

/** At the root of the S3 listener. */
const atRoot = (r: Signed) => s3(server.s3Port as number, { base: '', ...r });
/** Under /s3 on the main listener. */
const atMain = (r: Signed) => s3(server.port, r);

const versions = (unit: string): Promise<number[] | 'no unit'> => unitVersions(server, unit);

/** An unsigned request on a fresh connection: status, content type and body. */
function plainRequest(
  port: number,
  method: string,
  path: string,
): Promise<{ status: number; type: string; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path, agent: false }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), text }),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

function expectS3Error(r: RawReply, status: number, code: string): string {
  expect({ status: r.status, code: s3Code(r.text) }).toEqual({ status, code });
  expect(r.headers['content-type']).toMatch(/^application\/xml/);
  return /<Message>([^<]*)<\/Message>/.exec(r.text)?.[1] ?? '';
}

const tag = (xml: string, name: string): string[] =>
  [...xml.matchAll(new RegExp(`<${name}>([^<]*)</${name}>`, 'g'))].map((m) => m[1]);

beforeAll(async () => {
  const fresh = await freshServerEnv();
  cleanup = fresh.cleanup;
  env = {
    ...fresh.env,
    STATEHOUSE_S3_PORT: '0',
    STATEHOUSE_STS_TTL: '1h',
    STATEHOUSE_METRICS_TOKEN: METRICS_TOKEN,
  };
  startedAt = Date.now();
  server = await spawnServer(env);
  listenedAt = Date.now();
  creds = await s3CredentialsFor(server, 'svc:s3-port');
});

afterAll(async () => {
  await server?.stop();
  await cleanup?.();
});

describe('the S3 door at the root of its own listener', () => {
  it('the start-up line names both listeners', () => {
    expect(server.s3Port).toEqual(expect.any(Number));
    expect(server.s3Port).not.toBe(server.port);
    expect(server.output()).toMatch(
      new RegExp(
        `listening on http://127\\.0\\.0\\.1:${server.port}, and for S3 clients on http://127\\.0\\.0\\.1:${server.s3Port} \\(the S3 door at its root\\)`,
      ),
    );
  });

  it('PutObject, GetObject, HeadObject at /<bucket>/<key>: the same state as /s3 on the main port', async () => {
    const key = 'port/app/terraform.tfstate';
    expect((await atRoot({ method: 'PUT', key, body: SIMPLE })).status).toBe(200);
    expect(await versions('port/app')).toEqual([1]);
    const got = await atRoot({ method: 'GET', key });
    expect(got.status).toBe(200);
    expect(Buffer.from(got.text)).toEqual(SIMPLE);
    expect((await atRoot({ method: 'HEAD', key })).headers['content-length']).toBe(
      String(SIMPLE.length),
    );
    const viaMain = await atMain({ method: 'GET', key });
    expect(viaMain.status).toBe(200);
    expect(viaMain.text).toBe(got.text);
  });

  it('SigV4 is checked over the path as received: a request signed for the other base is refused, nothing stored', async () => {
    const key = 'port/crossed/terraform.tfstate';
    const body = tfState(1, 'crossed');
    // Signed for /s3/tfstate/… but sent to the S3 listener as /tfstate/…, and the reverse.
    const forMain = await signS3(server.s3Port as number, creds, { method: 'PUT', key, body });
    const sentAtRoot = await sendRaw(server.s3Port as number, {
      ...forMain,
      target: forMain.target.replace(/^\/s3/, ''),
    });
    expectS3Error(sentAtRoot, 403, 'SignatureDoesNotMatch');
    const forRoot = await signS3(server.port, creds, { method: 'PUT', key, body, base: '' });
    const sentToMain = await sendRaw(server.port, { ...forRoot, target: `/s3${forRoot.target}` });
    expectS3Error(sentToMain, 403, 'SignatureDoesNotMatch');
    expect(await versions('port/crossed')).toBe('no unit');
  });

  it('nothing but the S3 door: health, /v1, the docs and JWKS answer as S3 (no such bucket)', async () => {
    const port = server.s3Port as number;
    for (const path of ['/healthz', '/readyz', '/metrics', '/docs', '/v1/units', '/.well-known']) {
      // Unsigned: the S3 door's refusal of anonymous requests, in S3 XML.
      const anonymous = await plainRequest(port, 'GET', path);
      expect({ path, status: anonymous.status, code: s3Code(anonymous.text) }).toEqual({
        path,
        status: 403,
        code: 'AccessDenied',
      });
      expect(anonymous.type).toMatch(/^application\/xml/);
      // Signed: the first segment is a bucket, and no such bucket is served.
      const signed = await atRoot({ method: 'GET', bucket: path.slice(1), key: '' });
      expect({ path, status: signed.status, code: s3Code(signed.text) }).toEqual({
        path,
        status: 404,
        code: 'NoSuchBucket',
      });
    }
    // The bootstrap token as a bearer: not the management API here either.
    const bearer = await fetch(`http://127.0.0.1:${port}/v1/units`, { headers: server.auth });
    expect(bearer.status).toBe(400);
    expect(s3Code(await bearer.text())).toBe('InvalidRequest');
    // A request target that is no path at all: refused in S3 XML, the connection closed.
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1');
      let data = '';
      socket.on('data', (d: Buffer) => (data += d.toString()));
      socket.on('end', () => resolve(data));
      socket.on('error', reject);
      socket.write(`GET http://127.0.0.1:${port}/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
    });
    expect(raw).toMatch(/^HTTP\/1\.1 400 /);
    expect(raw).toContain('<Code>InvalidRequest</Code>');
    // The main port still serves everything else.
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  });

  it('a malformed percent-encoding in the path is answered in S3 XML (400 InvalidURI) on both bases, never JSON', async () => {
    const raw = plainRequest;
    for (const [port, base] of [
      [server.s3Port as number, ''],
      [server.port, '/s3'],
    ] as const) {
      for (const bad of ['/tfstate/%ZZ', '/tfstate/a/%E0%A4%A', '/%FF/terraform.tfstate']) {
        const r = await raw(port, 'GET', `${base}${bad}`);
        expect({ path: `${base}${bad}`, status: r.status, code: s3Code(r.text) }).toEqual({
          path: `${base}${bad}`,
          status: 400,
          code: 'InvalidURI',
        });
        expect(r.type).toMatch(/^application\/xml/);
        expect(r.text).toContain(`<Resource>${base}${bad}</Resource>`);
      }
      const head = await raw(port, 'HEAD', `${base}/tfstate/%ZZ`);
      expect({ status: head.status, text: head.text }).toEqual({ status: 400, text: '' });
    }
  });

  it('the location of a completed multipart upload is under the base it was sent to', async () => {
    for (const [where, send] of [
      ['/s3', atMain],
      ['', atRoot],
    ] as const) {
      const key = `port/multipart${where === '' ? '-root' : ''}/terraform.tfstate`;
      const state = tfState(1, `mp-${where}`, 'x'.repeat(6 * MiB));
      const created = await send({ method: 'POST', key, query: { uploads: '' } });
      expect(created.status).toBe(200);
      const uploadId = tag(created.text, 'UploadId')[0];
      const parts = [state.subarray(0, 5 * MiB), state.subarray(5 * MiB)];
      const etags: string[] = [];
      for (const [i, part] of parts.entries()) {
        const r = await send({
          method: 'PUT',
          key,
          query: { partNumber: String(i + 1), uploadId },
          body: part,
        });
        expect(r.status).toBe(200);
        etags.push(String(r.headers.etag));
      }
      const done = await send({
        method: 'POST',
        key,
        query: { uploadId },
        body: Buffer.from(
          `<CompleteMultipartUpload>${etags.map((e, i) => `<Part><PartNumber>${i + 1}</PartNumber><ETag>${e}</ETag></Part>`).join('')}</CompleteMultipartUpload>`,
        ),
      });
      expect(done.status).toBe(200);
      expect(tag(done.text, 'Location')).toEqual([`${where}/tfstate/${key}`]);
    }
  });

  it('GetBucketLocation (s3cmd: GET /tfstate/?location) answers on both bases', async () => {
    for (const send of [atMain, atRoot]) {
      const r = await send({ method: 'GET', key: '', query: { location: '' } });
      expect(r.status).toBe(200);
      expect(r.text).toContain(
        '<LocationConstraint xmlns="http://s3.amazonaws.com/doc/2006-03-01/">',
      );
    }
    const slash = await sendRaw(
      server.s3Port as number,
      await signS3(server.s3Port as number, creds, {
        method: 'GET',
        key: '',
        base: '',
        bucket: 'tfstate/',
        query: { location: '' },
      }),
    );
    expect(slash.status).toBe(200);
  });

  it('a virtual-hosted-style Host (tfstate.<this server>) is refused with a clear message, nothing stored', async () => {
    const key = 'port/vhost.tfstate';
    for (const [port, base] of [
      [server.s3Port as number, ''],
      [server.port, '/s3'],
    ] as const) {
      // What a virtual-host client sends: the key alone as the path, the bucket in the Host.
      const r = await s3(port, {
        method: 'PUT',
        key,
        bucket: '',
        base,
        host: `tfstate.127.0.0.1:${port}`,
        body: tfState(1, 'vhost'),
      });
      const message = expectS3Error(r, 400, 'InvalidRequest');
      expect(message).toContain('Virtual-hosted-style requests are not supported');
      expect(message).toContain('host_bucket = host_base');
    }
    expect(await versions('port/vhost.tfstate')).toBe('no unit');
  });
});

describe('the graph knows both bases', () => {
  it('a terraform_remote_state whose s3 endpoint is the S3 port (no /s3) is a dependency on a state here', async () => {
    const producer = readFileSync(join(FIXTURES, 'producer-network.tfstate'));
    expect(
      (await atMain({ method: 'PUT', key: 'platform/network/terraform.tfstate', body: producer }))
        .status,
    ).toBe(200);
    const consumer = readFileSync(join(FIXTURES, 'consumer.tfstate'), 'utf8')
      .split('http://127.0.0.1:8080/s3')
      .join(`http://127.0.0.1:${server.s3Port}`)
      .split('http://127.0.0.1:8080')
      .join(server.url);
    expect(consumer).toContain(`"s3": "http://127.0.0.1:${server.s3Port}"`);
    const key = 'apps/consumer/terraform.tfstate';
    expect((await atRoot({ method: 'PUT', key, body: Buffer.from(consumer) })).status).toBe(200);
    const graph = await api('/v1/graph?prefix=apps/');
    expect(graph.status).toBe(200);
    const { edges } = (await graph.json()) as {
      edges: { name: string; producer: { unit: string }; source: string }[];
    };
    expect(edges.map((e) => [e.name, e.producer.unit, e.source]).sort()).toEqual([
      ['dns', 'platform/dns', 'discovered'],
      ['network', 'platform/network', 'discovered'],
    ]);
  });
});

describe('what S3 clients send first, on both bases', () => {
  it('CreateBucket on the configured bucket: 200, its CreateBucketConfiguration body read', async () => {
    const body = Buffer.from(
      '<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><LocationConstraint>us-east-1</LocationConstraint></CreateBucketConfiguration>',
    );
    for (const send of [atMain, atRoot]) {
      const r = await send({ method: 'PUT', key: '', body });
      expect({ status: r.status, text: r.text }).toEqual({ status: 200, text: '' });
      expect((await send({ method: 'PUT', key: '' })).status).toBe(200);
    }
    // The body is checked against its signed hash like any other.
    const signed = await signS3(server.port, creds, { method: 'PUT', key: '', body });
    const tampered = await sendRaw(server.port, {
      ...signed,
      body: Buffer.from(body.toString().replace('us-east-1', 'us-east-2')),
    });
    expectS3Error(tampered, 400, 'XAmzContentSHA256Mismatch');
  });

  it('CreateBucket of any other name: 403 AccessDenied naming STATEHOUSE_S3_DOOR_BUCKETS', async () => {
    for (const send of [atMain, atRoot]) {
      const message = expectS3Error(
        await send({ method: 'PUT', bucket: 'my-new-bucket', key: '' }),
        403,
        'AccessDenied',
      );
      expect(message).toContain('STATEHOUSE_S3_DOOR_BUCKETS');
      expect(message).toContain('tfstate');
    }
  });

  it('ListObjects (v1) with marker, prefix, delimiter and max-keys pages by NextMarker', async () => {
    for (const key of ['list/a/terraform.tfstate', 'list/b/terraform.tfstate', 'list/c.tfstate']) {
      expect((await atMain({ method: 'PUT', key, body: tfState(1, key) })).status).toBe(200);
    }
    for (const send of [atMain, atRoot]) {
      const page1 = await send({
        method: 'GET',
        key: '',
        query: { prefix: 'list/', delimiter: '/', 'max-keys': '2' },
      });
      expect(page1.status).toBe(200);
      expect(tag(page1.text, 'Prefix')).toEqual(['list/', 'list/a/', 'list/b/']);
      expect(tag(page1.text, 'IsTruncated')).toEqual(['true']);
      expect(tag(page1.text, 'NextMarker')).toEqual(['list/b/']);
      const page2 = await send({
        method: 'GET',
        key: '',
        query: { prefix: 'list/', delimiter: '/', 'max-keys': '2', marker: 'list/b/' },
      });
      expect(tag(page2.text, 'Key')).toEqual(['list/c.tfstate']);
      expect(tag(page2.text, 'Marker')).toEqual(['list/b/']);
      expect(tag(page2.text, 'IsTruncated')).toEqual(['false']);
      expect(page2.text).not.toContain('<NextMarker>');
    }
  });

  it('requests on the S3 port are counted as the S3 door, by operation (ListObjects, CreateBucket)', async () => {
    const count = async (operation: string): Promise<number> => {
      const r = await fetch(`http://127.0.0.1:${server.port}/metrics`, {
        headers: { Authorization: `Bearer ${METRICS_TOKEN}` },
      });
      expect(r.status).toBe(200);
      const labels = { door: 's3', operation, status: '2xx' };
      return (
        valueOf(
          parseExposition(await r.text()),
          'statehouse_http_request_duration_seconds_count',
          labels,
        ) ?? 0
      );
    };
    const before = { list: await count('ListObjects'), create: await count('CreateBucket') };
    expect((await atRoot({ method: 'GET', key: '', query: { prefix: 'none/' } })).status).toBe(200);
    expect((await atRoot({ method: 'PUT', key: '' })).status).toBe(200);
    // A request is recorded when its answer is over, which may be just after the client has it.
    let after = before;
    for (let i = 0; i < 50; i++) {
      after = { list: await count('ListObjects'), create: await count('CreateBucket') };
      if (after.list > before.list && after.create > before.create) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(after).toEqual({ list: before.list + 1, create: before.create + 1 });
  });

  it('ListBuckets shows when the server first served the bucket, not a fixed date', async () => {
    for (const send of [atMain, atRoot]) {
      const r = await send({ method: 'GET', bucket: '', key: '' });
      expect(r.status).toBe(200);
      expect(tag(r.text, 'Name')).toEqual(['tfstate']);
      creationDate = tag(r.text, 'CreationDate')[0];
      expect(Date.parse(creationDate)).toBeGreaterThanOrEqual(startedAt - 1000);
      expect(Date.parse(creationDate)).toBeLessThanOrEqual(listenedAt);
    }
  });
});

describe('stopping and starting again', () => {
  it('SIGTERM closes both listeners: a request in flight on the S3 port is finished, then both ports are free (exit 143)', async () => {
    const port = server.s3Port as number;
    const key = 'port/inflight/terraform.tfstate';
    const body = tfState(1, 'inflight', 'y'.repeat(256 * 1024));
    const signed = await signS3(port, creds, { method: 'PUT', key, body, base: '' });
    const answered = new Promise<number>((resolve, reject) => {
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port,
          method: 'PUT',
          path: signed.target,
          headers: signed.headers,
          agent: false,
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      req.write(body.subarray(0, 1000));
      // The rest once the server has been told to stop.
      setTimeout(() => req.end(body.subarray(1000)), 1500);
    });
    await new Promise((r) => setTimeout(r, 300));
    const stopped = server.stop();
    expect(await answered).toBe(200);
    await stopped;
    expect(server.proc.exitCode).toBe(143);
    expect(await portIsFree(server.port)).toBe(true);
    expect(await portIsFree(port)).toBe(true);
    expect(server.output()).toContain('stopped cleanly');
  });

  it('after a restart ListBuckets shows the same creation time', async () => {
    expect(creationDate).toBeDefined();
    server = await spawnServer(env);
    creds = await s3CredentialsFor(server, 'svc:s3-port-again');
    const r = await atRoot({ method: 'GET', bucket: '', key: '' });
    expect(tag(r.text, 'CreationDate')).toEqual([creationDate]);
    expect(await versions('port/inflight')).toEqual([1]);
  });
});

describe('over TLS (STATEHOUSE_TLS_CERT_FILE): the S3 listener serves https too', () => {
  let tls: RunningServer;
  let tlsCleanup: (() => Promise<void>) | undefined;
  let dir: string;
  let cert: Buffer;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'statehouse-s3-port-tls-'));
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
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
        '-days',
        '2',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
      ],
      { stdio: 'pipe' },
    );
    cert = readFileSync(join(dir, 'cert.pem'));
    const fresh = await freshServerEnv();
    tlsCleanup = fresh.cleanup;
    tls = await spawnServer(
      {
        ...fresh.env,
        STATEHOUSE_S3_PORT: '0',
        STATEHOUSE_TLS_CERT_FILE: join(dir, 'cert.pem'),
        STATEHOUSE_TLS_KEY_FILE: join(dir, 'key.pem'),
      },
      { waitReady: false },
    );
  });

  afterAll(async () => {
    await tls?.stop();
    await tlsCleanup?.();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const get = (port: number, path: string) =>
    new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = httpsRequest({ host: '127.0.0.1', port, path, ca: cert, agent: false }, (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      });
      req.on('error', reject);
      req.end();
    });

  it('both listeners answer over https with the same certificate; the S3 one only as the S3 door', async () => {
    expect(tls.s3Url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(tls.output()).toMatch(
      /listening on https:\/\/127\.0\.0\.1:\d+, and for S3 clients on https:/,
    );
    expect((await get(tls.port, '/healthz')).status).toBe(200);
    const root = await get(tls.s3Port as number, '/healthz');
    expect({ status: root.status, code: s3Code(root.text) }).toEqual({
      status: 403,
      code: 'AccessDenied',
    });
  });
});
