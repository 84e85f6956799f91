/**
 * The `/s3` door against hostile requests (issue 9), with the real `statehouse serve` process:
 * a malformed 1 MiB CompleteMultipartUpload is refused at once while `/healthz` keeps answering
 * (the part list used to be read by a backtracking regular expression that held the event loop
 * for ~25 s), and an oversized lock body is refused like every oversized S3 body, drained.
 */
import { get as httpGet } from 'node:http';
import { freshServerEnv } from '../support/database';
import { RunningServer, spawnServer } from '../support/server';
import { pipelined, RawReply, S3Creds, s3Code, sendRaw, signS3 } from '../support/s3-signer';

jest.setTimeout(180_000);

const MiB = 1024 * 1024;
let server: RunningServer;
let cleanup: () => Promise<void>;
let creds: S3Creds;

async function api(path: string, init: RequestInit = {}, bearer = server.token) {
  return fetch(`${server.url}${path}`, {
    ...init,
    headers: { Authorization: `Bearer ${bearer}`, ...(init.headers as Record<string, string>) },
  });
}

async function credentialsFor(subject: string): Promise<S3Creds> {
  const t = await api('/v1/auth/tokens', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: `s3-hardening ${subject}`, subject }),
  });
  expect(t.status).toBe(201);
  const { token } = (await t.json()) as { token: string };
  const c = await api('/v1/auth/issue-s3-creds', { method: 'POST' }, token);
  expect(c.status).toBe(200);
  return (await c.json()) as S3Creds;
}

function healthz(): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpGet(`${server.url}/healthz`, { agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
  });
}

async function s3(r: Parameters<typeof signS3>[2], as: S3Creds = creds): Promise<RawReply> {
  return sendRaw(server.port, await signS3(server.port, as, r));
}

beforeAll(async () => {
  const fresh = await freshServerEnv();
  cleanup = fresh.cleanup;
  server = await spawnServer(fresh.env);
  creds = await credentialsFor('svc:s3-hardening');
});

afterAll(async () => {
  await server?.stop();
  await cleanup?.();
});

describe('a malformed 1 MiB CompleteMultipartUpload', () => {
  it('is refused with MalformedXML at once, and /healthz answers promptly meanwhile', async () => {
    const key = 'hostile/complete/terraform.tfstate';
    const created = await s3({ method: 'POST', key, query: { uploads: '' } });
    expect(created.status).toBe(200);
    const uploadId = /<UploadId>([^<]+)<\/UploadId>/.exec(created.text)?.[1] as string;
    // `<Part>` 174,000 times and no closing tags: the body of the report.
    const head = '<CompleteMultipartUpload>';
    const body = Buffer.from(head + '<Part>'.repeat(Math.floor((MiB - head.length) / 6)));
    const request = await signS3(server.port, creds, {
      method: 'POST',
      key,
      query: { uploadId },
      body,
    });

    // /healthz on fresh connections, one after the other, for as long as the request runs.
    const latencies: number[] = [];
    let done = false;
    const probe = (async () => {
      while (!done) {
        const t = performance.now();
        expect(await healthz()).toBe(200);
        latencies.push(performance.now() - t);
        await new Promise((res) => setTimeout(res, 20));
      }
    })();
    await new Promise((res) => setTimeout(res, 100)); // the probe is running
    const started = performance.now();
    const r = await sendRaw(server.port, request);
    const refusedAfter = performance.now() - started;
    await new Promise((res) => setTimeout(res, 100));
    done = true;
    await probe;

    expect(r.status).toBe(400);
    expect(s3Code(r.text)).toBe('MalformedXML');
    expect(r.text).toMatch(/ended inside|nested deeper/);
    const worst = Math.max(...latencies);
    console.log(
      `1 MiB malformed CompleteMultipartUpload refused after ${refusedAfter.toFixed(0)} ms; ` +
        `/healthz during it: ${latencies.length} probes, worst ${worst.toFixed(0)} ms`,
    );
    // A linear parse of 1 MiB takes milliseconds; the old parser took ~25 s.
    expect(refusedAfter).toBeLessThan(2_000);
    expect(worst).toBeLessThan(1_000);
    // The upload is untouched and can still be aborted.
    const aborted = await s3({ method: 'DELETE', key, query: { uploadId } });
    expect(aborted.status).toBe(204);
  });
});

describe('an oversized lock body', () => {
  it('is refused with EntityTooLarge (like every oversized S3 body), drained, and no lock is taken', async () => {
    const key = 'hostile/lock/terraform.tfstate.tflock';
    const body = Buffer.from(
      JSON.stringify({ ID: 'x', Operation: 'OperationTypeApply', Info: 'x'.repeat(8 * MiB) }),
    );
    const request = await signS3(server.port, creds, {
      method: 'PUT',
      key,
      headers: { 'if-none-match': '*' },
      body,
    });
    // Both on one connection: the GET is only read after the whole 8 MiB lock body was
    // (drained — neither left unread in the socket nor cut off by closing it).
    const next = await signS3(server.port, creds, {
      method: 'GET',
      key: 'hostile/lock/terraform.tfstate',
    });
    const [r, after] = await pipelined(server.port, [request, next]);
    expect(r?.status).toBe(400);
    expect(s3Code(r?.text ?? '')).toBe('EntityTooLarge');
    expect(r?.text).toContain('the lock object is larger than 65536 bytes');
    expect(after?.status).toBe(404);
    expect(s3Code(after?.text ?? '')).toBe('NoSuchKey');
    const lock = await api(`/v1/units/${encodeURIComponent('hostile/lock')}/lock`);
    expect(lock.status).not.toBe(200);
  });
});
