/**
 * The `/s3` door driven by real S3 clients over real sockets, against the real
 * `statehouse serve` process: the AWS CLI (v1, botocore, with `credential_process =
 * statehouse creds --json`) and `@aws-sdk/client-s3` / `@aws-sdk/lib-storage` (with credentials
 * from `POST /v1/auth/issue-s3-creds`). Objects, listings, multipart, a presigned GET and the
 * lock object of a state (Terraform's `use_lockfile = true`), each checked against what the
 * management API says was stored.
 *
 * Presigning: `@aws-sdk/s3-request-presigner` is not installed here, so the presigned URL is
 * made the way that package makes it — `@smithy/signature-v4`'s `presign()` over the request
 * with `x-amz-content-sha256: UNSIGNED-PAYLOAD` (hoisted into the query) — with a node:crypto
 * SHA-256 in place of `@aws-crypto/sha256-js` (also not installed).
 *
 * Needs `aws` on the PATH: without it the suite fails (it does not skip).
 */
import {
  AbortMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  ListObjectsV2CommandOutput,
  ListPartsCommand,
  ListPartsCommandOutput,
  PutObjectCommand,
  S3Client,
  CompleteMultipartUploadCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { SignatureV4 } from '@smithy/signature-v4';
import type { Checksum, SourceData } from '@smithy/types';
import { execFileSync, spawn } from 'node:child_process';
import { createHash, createHmac, Hash, Hmac, randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ACTIONS } from '../../src/rbac/actions';
import { ADMIN_ONLY } from '../../src/rbac/authorization.service';
import { freshServerEnv, ON_POSTGRES } from '../support/database';
import { CLI, FIXTURES } from '../support/paths';
import { NODE, RunningServer, spawnServer } from '../support/server';
import { tfStateText } from '../support/tf-state';

jest.setTimeout(180_000);

const BUCKET = 'tfstate';
const SIMPLE = readFileSync(join(FIXTURES, 'simple.tfstate'));
const MiB = 1024 * 1024;

interface Creds {
  AccessKeyId: string;
  SecretAccessKey: string;
  SessionToken: string;
  Expiration: string;
}

interface VersionItem {
  version: number;
  serial: number | null;
  sha256: string;
  md5: string;
  size: number;
  createdBy: string;
  door: string;
}

/** A Terraform v4 state, pretty-printed like Terraform writes it. */
function tfState(serial: number, lineage: string, pad = ''): string {
  return tfStateText({ serial, lineage, outputs: pad === '' ? {} : { pad } });
}

/** A valid state of exactly `size` bytes (padded through an output value). */
function stateOfSize(size: number, serial: number, lineage: string): Buffer {
  const base = Buffer.byteLength(tfState(serial, lineage, 'x'));
  const body = Buffer.from(tfState(serial, lineage, 'x'.repeat(size - base + 1)));
  expect(body.length).toBe(size);
  return body;
}

/** Terraform's LockInfo, compact, as `terraform` sends it for `backend "s3"`. */
function lockInfo(id: string, who: string, key: string): string {
  return `{"ID":"${id}","Operation":"OperationTypeApply","Info":"","Who":"${who}","Version":"1.11.4","Created":"2026-01-02T03:04:05.123456789Z","Path":"${BUCKET}/${key}"}`;
}

const md5Hex = (b: Buffer | string): string => createHash('md5').update(b).digest('hex');
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** node:crypto as the SHA-256 (and HMAC-SHA-256) constructor `@smithy/signature-v4` takes. */
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

/** The S3 error an SDK call failed with (name = S3 code, and the HTTP status). */
async function sdkError(p: Promise<unknown>): Promise<{
  name: string;
  status: number | undefined;
  message: string;
}> {
  try {
    await p;
  } catch (e) {
    const err = e as { name: string; message: string; $metadata?: { httpStatusCode?: number } };
    return { name: err.name, status: err.$metadata?.httpStatusCode, message: err.message };
  }
  throw new Error('the call succeeded, an error was expected');
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(cmd: string, args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((resolve, reject) => {
    const proc = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    proc.once('error', reject);
    proc.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

function which(cmd: string): string | undefined {
  try {
    return (
      execFileSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' }).trim() || undefined
    );
  } catch {
    return undefined;
  }
}

let server: RunningServer;
let cleanup: () => Promise<void>;
let dataDir: string;
let dir: string;
let mainToken: string;
let main: Creds;
let other: Creds;
let admin: Creds;
let s3: S3Client;
let s3Other: S3Client;
let s3Admin: S3Client;
const issued: Creds[] = [];

async function api(path: string, init: RequestInit = {}, bearer?: string): Promise<Response> {
  return fetch(`${server.url}${path}`, {
    ...init,
    headers: {
      Authorization: `Bearer ${bearer ?? server.token}`,
      ...(init.headers as Record<string, string> | undefined),
    },
  });
}

async function apiToken(subject: string): Promise<string> {
  const res = await api('/v1/auth/tokens', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: `s3-clients ${subject}`, subject }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { token: string }).token;
}

async function rbac(path: string, body: unknown): Promise<void> {
  const res = await api(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  expect(res.status).toBe(201);
}

async function issueCreds(bearer: string): Promise<Creds> {
  const res = await api('/v1/auth/issue-s3-creds', { method: 'POST' }, bearer);
  expect(res.status).toBe(200);
  const creds = (await res.json()) as Creds;
  issued.push(creds);
  return creds;
}

function client(c: Creds): S3Client {
  return new S3Client({
    endpoint: `${server.url}/s3`,
    forcePathStyle: true,
    region: 'us-east-1',
    credentials: {
      accessKeyId: c.AccessKeyId,
      secretAccessKey: c.SecretAccessKey,
      sessionToken: c.SessionToken,
    },
  });
}

/** Versions of (unit, workspace) through the management API; 'no unit' when it never existed. */
async function versions(unit: string, workspace = 'default'): Promise<VersionItem[] | 'no unit'> {
  const res = await api(
    `/v1/units/${encodeURIComponent(unit)}/versions?workspace=${encodeURIComponent(workspace)}`,
  );
  if (res.status === 404) return 'no unit';
  expect(res.status).toBe(200);
  return ((await res.json()) as { items: VersionItem[] }).items;
}

async function stateBody(unit: string, workspace = 'default'): Promise<Buffer | number> {
  const res = await api(
    `/v1/units/${encodeURIComponent(unit)}/state?workspace=${encodeURIComponent(workspace)}`,
  );
  if (res.status !== 200) return res.status;
  return Buffer.from(await res.arrayBuffer());
}

interface AuditLine {
  type: string;
  actor: string;
  outcome: string;
  unit?: string;
  workspace?: string;
  door?: string;
  details?: Record<string, unknown>;
}

function auditEvents(): AuditLine[] {
  const out: AuditLine[] = [];
  for (const line of server.output().split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const parsed = JSON.parse(line) as { audit?: AuditLine };
      if (parsed.audit) out.push(parsed.audit);
    } catch {
      // not a JSON line
    }
  }
  return out;
}

/** Audit lines are written asynchronously: wait until `pred` holds for one of them. */
async function waitForAudit(pred: (a: AuditLine) => boolean): Promise<AuditLine> {
  const deadline = Date.now() + 5000;
  for (;;) {
    const found = auditEvents().find(pred);
    if (found) return found;
    if (Date.now() > deadline) throw new Error('no matching audit event in the server output');
    await sleep(25);
  }
}

async function bodyOf(out: { Body?: unknown }): Promise<Buffer> {
  const b = out.Body as { transformToByteArray: () => Promise<Uint8Array> };
  return Buffer.from(await b.transformToByteArray());
}

beforeAll(async () => {
  if (!which('aws')) {
    throw new Error(
      'the AWS CLI (`aws`, v1) is not on the PATH: this suite needs it (pip install awscli)',
    );
  }
  const fresh = await freshServerEnv();
  cleanup = fresh.cleanup;
  dataDir = fresh.dataDir;
  // One hour: botocore re-runs credential_process for credentials with < 15 minutes left.
  server = await spawnServer({ ...fresh.env, STATEHOUSE_STS_TTL: '1h' });

  // bootstrap-admin mints no S3 credentials, so the admin of the S3 door is a service principal:
  // RBAC is initialised with svc:s3-admin as admin, and the others get what every principal may
  // do before that (everything but purge, force-unlock and administration).
  await rbac('/v1/rbac/init', { admin: { subject: 'svc:s3-admin' } });
  await rbac('/v1/rbac/permissions', {
    name: 'clients',
    rules: [
      {
        effect: 'allow',
        actions: ACTIONS.filter((a) => !ADMIN_ONLY.has(a)),
        resources: ['**'],
      },
    ],
  });
  await rbac('/v1/rbac/roles', { name: 'clients', permissions: ['clients'] });
  for (const subject of ['svc:main', 'svc:other']) {
    await rbac('/v1/rbac/assignments', { role: 'clients', subject });
  }
  mainToken = await apiToken('svc:main');
  const otherToken = await apiToken('svc:other');
  main = await issueCreds(mainToken);
  other = await issueCreds(otherToken);
  admin = await issueCreds(await apiToken('svc:s3-admin'));
  s3 = client(main);
  s3Other = client(other);
  s3Admin = client(admin);

  dir = mkdtempSync(join(tmpdir(), 'statehouse-s3-clients-'));
  execFileSync('mkdir', ['-p', join(dir, 'home'), join(dir, 'files')]);
  writeFileSync(join(dir, 'credentials'), '');
  writeFileSync(
    join(dir, 'config'),
    [
      '[profile p]',
      `credential_process = "${NODE}" "${CLI}" creds --json`,
      'region = us-east-1',
      's3 =',
      '    addressing_style = path',
      '',
    ].join('\n'),
  );
});

afterAll(async () => {
  s3?.destroy();
  s3Other?.destroy();
  s3Admin?.destroy();
  await server?.stop();
  await cleanup?.();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the AWS CLI (credential_process = statehouse creds --json)', () => {
  const files = (): string => join(dir, 'files');

  /** Runs `aws … --endpoint-url <server>/s3` as svc:main, credentials from the statehouse CLI. */
  function aws(args: string[]): Promise<Run> {
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) {
      if (v === undefined || k.startsWith('STATEHOUSE_') || k.startsWith('AWS_')) continue;
      if (k === 'DATABASE_URL') continue;
      env[k] = v;
    }
    return run('aws', ['--profile', 'p', '--endpoint-url', `${server.url}/s3`, ...args], {
      ...env,
      AWS_CONFIG_FILE: join(dir, 'config'),
      AWS_SHARED_CREDENTIALS_FILE: join(dir, 'credentials'),
      AWS_EC2_METADATA_DISABLED: 'true',
      HOME: join(dir, 'home'),
      STATEHOUSE_SERVER: server.url,
      STATEHOUSE_TOKEN: mainToken,
    });
  }

  function ok(r: Run): Run {
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    return r;
  }

  const big = stateOfSize(12 * MiB + 12345, 1, 'cli-big-lineage');

  it('aws s3 cp uploads a real Terraform state and downloads it byte for byte', async () => {
    writeFileSync(join(files(), 'simple.tfstate'), SIMPLE);
    ok(
      await aws([
        's3',
        'cp',
        '--only-show-errors',
        join(files(), 'simple.tfstate'),
        `s3://${BUCKET}/cli/simple/terraform.tfstate`,
      ]),
    );
    const stored = await versions('cli/simple');
    expect(stored).toEqual([
      expect.objectContaining({
        version: 1,
        size: SIMPLE.length,
        md5: md5Hex(SIMPLE),
        createdBy: 'svc:main',
        door: 's3',
      }),
    ]);
    expect(await stateBody('cli/simple')).toEqual(SIMPLE);

    ok(
      await aws([
        's3',
        'cp',
        '--only-show-errors',
        `s3://${BUCKET}/cli/simple/terraform.tfstate`,
        join(files(), 'simple.down'),
      ]),
    );
    expect(readFileSync(join(files(), 'simple.down')).equals(SIMPLE)).toBe(true);
  });

  it('aws s3 cp of a 12 MiB state uses multipart upload and ranged downloads, byte for byte', async () => {
    writeFileSync(join(files(), 'big.tfstate'), big);
    ok(
      await aws([
        's3',
        'cp',
        '--only-show-errors',
        join(files(), 'big.tfstate'),
        `s3://${BUCKET}/cli/big/terraform.tfstate`,
      ]),
    );
    // The CLI's multipart threshold is 8 MiB: it went through CreateMultipartUpload.
    expect(server.output()).toContain(`"url":"/s3/${BUCKET}/cli/big/terraform.tfstate?uploads"`);
    const stored = await versions('cli/big');
    expect(stored).toEqual([
      expect.objectContaining({ version: 1, size: big.length, md5: md5Hex(big), door: 's3' }),
    ]);
    // (Buffer.equals: Jest's deep equality is far too slow on 12 MiB.)
    expect(((await stateBody('cli/big')) as Buffer).equals(big)).toBe(true);

    ok(
      await aws([
        's3',
        'cp',
        '--only-show-errors',
        `s3://${BUCKET}/cli/big/terraform.tfstate`,
        join(files(), 'big.down'),
      ]),
    );
    expect(readFileSync(join(files(), 'big.down')).equals(big)).toBe(true);
  });

  it('aws s3 ls lists recursively, and by prefix with the "/" delimiter', async () => {
    const all = ok(await aws(['s3', 'ls', `s3://${BUCKET}/cli/`, '--recursive']));
    const lines = all.stdout.trim().split('\n');
    expect(lines).toEqual([
      expect.stringMatching(
        new RegExp(
          `^\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d +${big.length} cli/big/terraform\\.tfstate$`,
        ),
      ),
      expect.stringMatching(
        new RegExp(
          `^\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d +${SIMPLE.length} cli/simple/terraform\\.tfstate$`,
        ),
      ),
    ]);

    const dirs = ok(await aws(['s3', 'ls', `s3://${BUCKET}/cli/`]));
    expect(
      dirs.stdout
        .trim()
        .split('\n')
        .map((l) => l.trim()),
    ).toEqual(['PRE big/', 'PRE simple/']);

    const one = ok(await aws(['s3', 'ls', `s3://${BUCKET}/cli/simple/`]));
    expect(one.stdout.trim()).toMatch(new RegExp(` ${SIMPLE.length} terraform\\.tfstate$`));
  });

  it('a workspace key with ":" (env:/<ws>/<key>) goes up and is listed back (encoding-type=url)', async () => {
    ok(
      await aws([
        's3',
        'cp',
        '--only-show-errors',
        join(files(), 'simple.tfstate'),
        `s3://${BUCKET}/env:/staging/cli/ws/terraform.tfstate`,
      ]),
    );
    expect(await versions('cli/ws', 'staging')).toEqual([
      expect.objectContaining({ version: 1, md5: md5Hex(SIMPLE) }),
    ]);
    expect(await stateBody('cli/ws', 'default')).toBe(404);
    const listed = ok(await aws(['s3', 'ls', `s3://${BUCKET}/env:/`, '--recursive']));
    expect(listed.stdout.trim()).toMatch(
      new RegExp(` ${SIMPLE.length} env:/staging/cli/ws/terraform\\.tfstate$`),
    );
    const prefixes = ok(await aws(['s3', 'ls', `s3://${BUCKET}/env:/`]));
    expect(prefixes.stdout.trim()).toBe('PRE staging/');
  });

  it('aws s3api head-object gives the exact ContentLength and the quoted MD5 as ETag', async () => {
    const r = ok(
      await aws([
        's3api',
        'head-object',
        '--bucket',
        BUCKET,
        '--key',
        'cli/simple/terraform.tfstate',
      ]),
    );
    const head = JSON.parse(r.stdout) as Record<string, unknown>;
    expect(head).toMatchObject({
      ContentLength: SIMPLE.length,
      ETag: `"${md5Hex(SIMPLE)}"`,
      AcceptRanges: 'bytes',
    });
    expect(typeof head.LastModified).toBe('string');

    const missing = await aws([
      's3api',
      'head-object',
      '--bucket',
      BUCKET,
      '--key',
      'cli/never/terraform.tfstate',
    ]);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toMatch(/\(404\)/);
  });

  it('aws s3 rm soft-deletes the state: gone from S3, versions still listed by the API', async () => {
    ok(
      await aws(['s3', 'rm', '--only-show-errors', `s3://${BUCKET}/cli/simple/terraform.tfstate`]),
    );
    const head = await aws([
      's3api',
      'head-object',
      '--bucket',
      BUCKET,
      '--key',
      'cli/simple/terraform.tfstate',
    ]);
    expect(head.code).not.toBe(0);
    expect(head.stderr).toMatch(/\(404\)/);
    const listed = ok(await aws(['s3', 'ls', `s3://${BUCKET}/cli/`, '--recursive']));
    expect(listed.stdout).not.toContain('cli/simple/terraform.tfstate');
    expect(listed.stdout).toContain('cli/big/terraform.tfstate');

    expect(await stateBody('cli/simple')).toBe(404);
    expect(await versions('cli/simple')).toEqual([
      expect.objectContaining({ version: 1, md5: md5Hex(SIMPLE) }),
    ]);
    await waitForAudit(
      (a) => a.type === 'state.delete' && a.unit === 'cli/simple' && a.door === 's3',
    );
  });
});

describe('@aws-sdk/client-s3', () => {
  const KEY = 'sdk/app/terraform.tfstate';

  it('PutObject, GetObject (whole and ranged), HeadObject, DeleteObject', async () => {
    const put = await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: KEY, Body: SIMPLE }));
    expect(put.$metadata.httpStatusCode).toBe(200);
    expect(put.ETag).toBe(`"${md5Hex(SIMPLE)}"`);
    expect(await versions('sdk/app')).toEqual([
      expect.objectContaining({ size: SIMPLE.length, createdBy: 'svc:main', door: 's3' }),
    ]);

    const got = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: KEY }));
    expect(got.$metadata.httpStatusCode).toBe(200);
    expect(got.ContentLength).toBe(SIMPLE.length);
    expect(got.ETag).toBe(`"${md5Hex(SIMPLE)}"`);
    expect(await bodyOf(got)).toEqual(SIMPLE);

    const ranged = await s3.send(
      new GetObjectCommand({ Bucket: BUCKET, Key: KEY, Range: 'bytes=100-1123' }),
    );
    expect(ranged.$metadata.httpStatusCode).toBe(206);
    expect(ranged.ContentRange).toBe(`bytes 100-1123/${SIMPLE.length}`);
    expect(ranged.ContentLength).toBe(1024);
    expect(await bodyOf(ranged)).toEqual(SIMPLE.subarray(100, 1124));

    // Terraform's own first read: a 5 MiB range over a smaller state.
    const tfRange = await s3.send(
      new GetObjectCommand({ Bucket: BUCKET, Key: KEY, Range: 'bytes=0-5242879' }),
    );
    expect(tfRange.ContentRange).toBe(`bytes 0-${SIMPLE.length - 1}/${SIMPLE.length}`);
    expect(await bodyOf(tfRange)).toEqual(SIMPLE);

    const suffix = await s3.send(
      new GetObjectCommand({ Bucket: BUCKET, Key: KEY, Range: 'bytes=-50' }),
    );
    expect(suffix.$metadata.httpStatusCode).toBe(206);
    expect(await bodyOf(suffix)).toEqual(SIMPLE.subarray(SIMPLE.length - 50));

    expect(
      await sdkError(
        s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: KEY, Range: 'bytes=999999-' })),
      ),
    ).toMatchObject({ name: 'InvalidRange', status: 416 });

    const head = await s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: KEY }));
    expect(head.ContentLength).toBe(SIMPLE.length);
    expect(head.ETag).toBe(`"${md5Hex(SIMPLE)}"`);
    expect(head.LastModified).toBeInstanceOf(Date);

    const del = await s3.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: KEY }));
    expect(del.$metadata.httpStatusCode).toBe(204);
    expect(
      await sdkError(s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: KEY }))),
    ).toMatchObject({ name: 'NotFound', status: 404 });
    expect(
      await sdkError(s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: KEY }))),
    ).toMatchObject({ name: 'NoSuchKey', status: 404 });
    // Soft delete: the version is still there for a restore.
    expect(await versions('sdk/app')).toHaveLength(1);
    // Deleting what is not there is a success in S3.
    const again = await s3.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: KEY }));
    expect(again.$metadata.httpStatusCode).toBe(204);
  });

  describe('ListObjectsV2', () => {
    const keys = [
      'page/a/terraform.tfstate',
      'page/b/terraform.tfstate',
      'page/c.tfstate',
      'page/d/e/terraform.tfstate',
      'page/f/terraform.tfstate',
    ];

    beforeAll(async () => {
      let serial = 1;
      for (const Key of keys) {
        await s3.send(
          new PutObjectCommand({
            Bucket: BUCKET,
            Key,
            Body: tfState(serial++, `lineage-${Key}`),
          }),
        );
      }
    });

    async function listAll(input: {
      Prefix?: string;
      Delimiter?: string;
      MaxKeys?: number;
      StartAfter?: string;
    }): Promise<{ pages: ListObjectsV2CommandOutput[]; keys: string[]; prefixes: string[] }> {
      const pages: ListObjectsV2CommandOutput[] = [];
      let token: string | undefined;
      do {
        const page = await s3.send(
          new ListObjectsV2Command({ Bucket: BUCKET, ...input, ContinuationToken: token }),
        );
        pages.push(page);
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
        expect(pages.length).toBeLessThan(20);
      } while (token !== undefined);
      return {
        pages,
        keys: pages.flatMap((p) => (p.Contents ?? []).map((c) => c.Key as string)),
        prefixes: pages.flatMap((p) => (p.CommonPrefixes ?? []).map((c) => c.Prefix as string)),
      };
    }

    it('pages with MaxKeys and ContinuationToken, in key order, with KeyCount and sizes', async () => {
      const { pages, keys: got } = await listAll({ Prefix: 'page/', MaxKeys: 2 });
      expect(got).toEqual(keys);
      expect(pages.map((p) => [p.KeyCount, p.IsTruncated])).toEqual([
        [2, true],
        [2, true],
        [1, false],
      ]);
      expect(pages[0].MaxKeys).toBe(2);
      expect(pages[1].ContinuationToken).toBe(pages[0].NextContinuationToken);
      const first = pages[0].Contents?.[0];
      const body = Buffer.from(tfState(1, `lineage-${keys[0]}`));
      expect(first).toMatchObject({ Key: keys[0], Size: body.length, ETag: `"${md5Hex(body)}"` });
      expect(first?.LastModified).toBeInstanceOf(Date);
    });

    it('StartAfter starts after the given key', async () => {
      const { keys: got } = await listAll({
        Prefix: 'page/',
        StartAfter: 'page/b/terraform.tfstate',
      });
      expect(got).toEqual(keys.slice(2));
    });

    it('Delimiter rolls keys up into CommonPrefixes, also across pages', async () => {
      const whole = await listAll({ Prefix: 'page/', Delimiter: '/' });
      expect(whole.keys).toEqual(['page/c.tfstate']);
      expect(whole.prefixes).toEqual(['page/a/', 'page/b/', 'page/d/', 'page/f/']);
      expect(whole.pages[0].KeyCount).toBe(5);

      const paged = await listAll({ Prefix: 'page/', Delimiter: '/', MaxKeys: 2 });
      expect(paged.pages).toHaveLength(3);
      expect(paged.keys).toEqual(whole.keys);
      expect(paged.prefixes).toEqual(whole.prefixes);

      const deeper = await listAll({ Prefix: 'page/d/', Delimiter: '/' });
      expect(deeper.keys).toEqual([]);
      expect(deeper.prefixes).toEqual(['page/d/e/']);
    });

    it('MaxKeys 0 answers an empty, truncated page', async () => {
      const page = await s3.send(
        new ListObjectsV2Command({ Bucket: BUCKET, Prefix: 'page/', MaxKeys: 0 }),
      );
      expect(page.KeyCount).toBe(0);
      expect(page.Contents ?? []).toEqual([]);
    });
  });

  it('a workspace key env:/dev/<key> is that workspace of the unit, listed under env:/', async () => {
    const key = 'wsunit/terraform.tfstate';
    const def = Buffer.from(tfState(1, 'ws-default'));
    const dev = Buffer.from(tfState(1, 'ws-dev'));
    await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: def }));
    await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: `env:/dev/${key}`, Body: dev }));

    expect(await versions('wsunit', 'dev')).toEqual([
      expect.objectContaining({ md5: md5Hex(dev) }),
    ]);
    expect(await versions('wsunit', 'default')).toEqual([
      expect.objectContaining({ md5: md5Hex(def) }),
    ]);
    const got = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: `env:/dev/${key}` }));
    expect(await bodyOf(got)).toEqual(dev);

    // What `terraform workspace list` sends: list-type=2, prefix env:/ (no delimiter).
    const listed = await s3.send(
      new ListObjectsV2Command({ Bucket: BUCKET, Prefix: 'env:/', MaxKeys: 1000 }),
    );
    // (env:/staging/… was written by the AWS CLI tests above.)
    expect((listed.Contents ?? []).map((c) => c.Key)).toEqual([
      `env:/dev/${key}`,
      'env:/staging/cli/ws/terraform.tfstate',
    ]);
    const grouped = await s3.send(
      new ListObjectsV2Command({ Bucket: BUCKET, Prefix: 'env:/', Delimiter: '/' }),
    );
    expect((grouped.CommonPrefixes ?? []).map((c) => c.Prefix)).toEqual([
      'env:/dev/',
      'env:/staging/',
    ]);
  });

  it('Upload (lib-storage) of a 12 MiB state: multipart, ListParts in progress, one version', async () => {
    const key = 'upload/big/terraform.tfstate';
    const body = stateOfSize(12 * MiB + 777, 1, 'upload-big');
    const PART = 5 * MiB;
    let uploadId: string | undefined;
    let inProgress: ListPartsCommandOutput | undefined;
    let versionsInProgress: VersionItem[] | 'no unit' | undefined;

    // Captures the UploadId, and — just before CompleteMultipartUpload goes out, with every part
    // uploaded — looks at the upload from the outside.
    const uploader = client(main);
    uploader.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === 'CompleteMultipartUploadCommand' && uploadId) {
          inProgress = await s3.send(
            new ListPartsCommand({ Bucket: BUCKET, Key: key, UploadId: uploadId }),
          );
          versionsInProgress = await versions('upload/big');
        }
        const result = await next(args);
        if (context.commandName === 'CreateMultipartUploadCommand') {
          uploadId = (result.output as { UploadId?: string }).UploadId;
        }
        return result;
      },
      { step: 'initialize', name: 'watchMultipart' },
    );
    try {
      const upload = new Upload({
        client: uploader,
        params: { Bucket: BUCKET, Key: key, Body: body },
        partSize: PART,
        queueSize: 2,
      });
      const done = await upload.done();
      expect(done.$metadata.httpStatusCode).toBe(200);
    } finally {
      uploader.destroy();
    }

    expect(uploadId).toEqual(expect.any(String));
    expect(inProgress?.UploadId).toBe(uploadId);
    expect(
      (inProgress?.Parts ?? []).map((p) => ({ n: p.PartNumber, size: p.Size, etag: p.ETag })),
    ).toEqual([
      { n: 1, size: PART, etag: `"${md5Hex(body.subarray(0, PART))}"` },
      { n: 2, size: PART, etag: `"${md5Hex(body.subarray(PART, 2 * PART))}"` },
      { n: 3, size: body.length - 2 * PART, etag: `"${md5Hex(body.subarray(2 * PART))}"` },
    ]);
    // Parts are not a version: only the completed upload is.
    expect(versionsInProgress).toBe('no unit');

    expect(await versions('upload/big')).toEqual([
      expect.objectContaining({ version: 1, size: body.length, md5: md5Hex(body) }),
    ]);
    const head = await s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: key }));
    expect(head.ContentLength).toBe(body.length);
    const got = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: key }));
    expect((await bodyOf(got)).equals(body)).toBe(true);
    // Terraform downloads large states in 5 MiB ranges.
    const second = await s3.send(
      new GetObjectCommand({ Bucket: BUCKET, Key: key, Range: `bytes=${PART}-${2 * PART - 1}` }),
    );
    expect(second.$metadata.httpStatusCode).toBe(206);
    expect((await bodyOf(second)).equals(body.subarray(PART, 2 * PART))).toBe(true);
    // The completed upload is gone.
    expect(
      await sdkError(
        s3.send(new ListPartsCommand({ Bucket: BUCKET, Key: key, UploadId: uploadId })),
      ),
    ).toMatchObject({ name: 'NoSuchUpload', status: 404 });
  });

  it('AbortMultipartUpload leaves nothing behind', async () => {
    const key = 'upload/aborted/terraform.tfstate';
    const body = stateOfSize(6 * MiB, 1, 'upload-aborted');
    const partsDir = join(dataDir, 'blobs', 'parts');
    const partBlobs = (): string[] => (existsSync(partsDir) ? readdirSync(partsDir) : []);
    const blobsBefore = partBlobs();

    const created = await s3.send(new CreateMultipartUploadCommand({ Bucket: BUCKET, Key: key }));
    const UploadId = created.UploadId as string;
    expect(UploadId).toEqual(expect.any(String));
    const part1 = await s3.send(
      new UploadPartCommand({
        Bucket: BUCKET,
        Key: key,
        UploadId,
        PartNumber: 1,
        Body: body.subarray(0, 5 * MiB),
      }),
    );
    expect(part1.ETag).toBe(`"${md5Hex(body.subarray(0, 5 * MiB))}"`);
    const listed = await s3.send(new ListPartsCommand({ Bucket: BUCKET, Key: key, UploadId }));
    expect((listed.Parts ?? []).map((p) => [p.PartNumber, p.Size])).toEqual([[1, 5 * MiB]]);
    if (!ON_POSTGRES) expect(partBlobs().length).toBe(blobsBefore.length + 1);

    // Someone else cannot see (or abort) the upload.
    expect(
      await sdkError(s3Other.send(new ListPartsCommand({ Bucket: BUCKET, Key: key, UploadId }))),
    ).toMatchObject({ name: 'NoSuchUpload', status: 404 });

    const aborted = await s3.send(
      new AbortMultipartUploadCommand({ Bucket: BUCKET, Key: key, UploadId }),
    );
    expect(aborted.$metadata.httpStatusCode).toBe(204);

    expect(
      await sdkError(s3.send(new ListPartsCommand({ Bucket: BUCKET, Key: key, UploadId }))),
    ).toMatchObject({ name: 'NoSuchUpload', status: 404 });
    expect(
      await sdkError(
        s3.send(
          new UploadPartCommand({
            Bucket: BUCKET,
            Key: key,
            UploadId,
            PartNumber: 2,
            Body: body.subarray(5 * MiB),
          }),
        ),
      ),
    ).toMatchObject({ name: 'NoSuchUpload', status: 404 });
    expect(
      await sdkError(
        s3.send(
          new CompleteMultipartUploadCommand({
            Bucket: BUCKET,
            Key: key,
            UploadId,
            MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part1.ETag }] },
          }),
        ),
      ),
    ).toMatchObject({ name: 'NoSuchUpload', status: 404 });
    expect(
      await sdkError(s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: key }))),
    ).toMatchObject({ name: 'NotFound', status: 404 });
    expect(await versions('upload/aborted')).toBe('no unit');
    if (!ON_POSTGRES) expect(partBlobs()).toEqual(blobsBefore);
  });

  describe('a presigned GET (made with @smithy/signature-v4 presign())', () => {
    const key = 'presign/app/terraform.tfstate';
    const signatures: string[] = [];

    beforeAll(async () => {
      await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: SIMPLE }));
    });

    /** A presigned URL, made as @aws-sdk/s3-request-presigner makes it. */
    async function presignGet(expiresIn: number): Promise<string> {
      const signer = new SignatureV4({
        service: 's3',
        region: 'us-east-1',
        credentials: {
          accessKeyId: main.AccessKeyId,
          secretAccessKey: main.SecretAccessKey,
          sessionToken: main.SessionToken,
        },
        sha256: NodeSha256,
        uriEscapePath: false,
        applyChecksum: false,
      });
      const presigned = await signer.presign(
        {
          method: 'GET',
          protocol: 'http:',
          hostname: '127.0.0.1',
          port: server.port,
          path: `/s3/${BUCKET}/${key}`,
          query: { 'x-id': 'GetObject' },
          headers: {
            host: `127.0.0.1:${server.port}`,
            'x-amz-content-sha256': 'UNSIGNED-PAYLOAD',
          },
        },
        { expiresIn },
      );
      const q = Object.entries(presigned.query ?? {})
        .map(([k, v]) => `${rfc3986(k)}=${rfc3986(String(v))}`)
        .join('&');
      signatures.push(String(presigned.query?.['X-Amz-Signature']));
      return `${server.url}${presigned.path}?${q}`;
    }

    it('fetched with plain fetch, it returns the state', async () => {
      const url = await presignGet(900);
      expect(url).toContain('X-Amz-Security-Token=');
      const res = await fetch(url);
      expect(res.status).toBe(200);
      expect(Buffer.from(await res.arrayBuffer())).toEqual(SIMPLE);
    });

    it('past X-Amz-Expires it is refused: 403 AccessDenied in S3 XML, and nothing read', async () => {
      const signedAt = Date.now();
      const url = await presignGet(2);
      const fresh = await fetch(url);
      expect(fresh.status).toBe(200);
      await fresh.arrayBuffer();
      // X-Amz-Date has whole seconds: wait until well past the expiry.
      await sleep(Math.max(0, signedAt + 3500 - Date.now()));
      const res = await fetch(url);
      const text = await res.text();
      expect(res.status).toBe(403);
      expect(res.headers.get('content-type')).toMatch(/^application\/xml/);
      expect(text).toMatch(
        /<Error><Code>AccessDenied<\/Code><Message>Request has expired<\/Message><Resource>\/s3\/tfstate\/presign\/app\/terraform\.tfstate<\/Resource><RequestId>[^<]+<\/RequestId><\/Error>$/,
      );
      expect(text).not.toContain('"version"');
    });

    it('the server log shows presigned URLs with their credentials redacted', () => {
      const out = server.output();
      expect(out).toContain('X-Amz-Signature=[redacted]');
      for (const s of signatures) expect(out).not.toContain(s);
    });
  });

  describe('the lock object <key>.tflock (Terraform use_lockfile)', () => {
    const key = 'locked/app/terraform.tfstate';
    const lockKey = `${key}.tflock`;
    const unit = 'locked/app';
    const v1 = Buffer.from(tfState(1, 'locked-lineage'));
    const v2 = Buffer.from(tfState(2, 'locked-lineage'));
    const v3 = Buffer.from(tfState(3, 'locked-lineage'));
    const held = lockInfo(randomUUID(), 'main@ci', key);

    const lock = (c: S3Client, info: string): Promise<unknown> =>
      c.send(
        new PutObjectCommand({
          Bucket: BUCKET,
          Key: lockKey,
          Body: info,
          IfNoneMatch: '*',
          ContentType: 'application/json',
        }),
      );
    const readLock = async (c: S3Client): Promise<string> =>
      (await bodyOf(await c.send(new GetObjectCommand({ Bucket: BUCKET, Key: lockKey })))).toString(
        'utf8',
      );

    beforeAll(async () => {
      await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: v1 }));
    });

    it('PutObject with If-None-Match: * takes the lock (200); the same LockInfo again succeeds again', async () => {
      const first = (await lock(s3, held)) as { $metadata: { httpStatusCode: number } };
      expect(first.$metadata.httpStatusCode).toBe(200);
      // Terraform retries a LOCK whose answer was lost: same principal, same ID.
      const retried = (await lock(s3, held)) as { $metadata: { httpStatusCode: number } };
      expect(retried.$metadata.httpStatusCode).toBe(200);
    });

    it('another principal gets 412 PreconditionFailed, and GetObject shows the holder LockInfo exactly', async () => {
      const mine = lockInfo(randomUUID(), 'other@laptop', key);
      expect(await sdkError(lock(s3Other, mine))).toMatchObject({
        name: 'PreconditionFailed',
        status: 412,
      });
      // The same principal with another lock ID is a conflict as well.
      expect(await sdkError(lock(s3, lockInfo(randomUUID(), 'main@ci', key)))).toMatchObject({
        name: 'PreconditionFailed',
        status: 412,
      });
      expect(await readLock(s3Other)).toBe(held);
      const head = await s3Other.send(new HeadObjectCommand({ Bucket: BUCKET, Key: lockKey }));
      expect(head.ContentLength).toBe(Buffer.byteLength(held));
    });

    it('a state PutObject by another principal while locked is refused (409 OperationAborted), nothing stored', async () => {
      const before = await versions(unit);
      const refused = await sdkError(
        s3Other.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: v2 })),
      );
      expect(refused).toMatchObject({ name: 'OperationAborted', status: 409 });
      expect(refused.message).toContain('locked by svc:main');
      expect(await versions(unit)).toEqual(before);
      // Deleting the state under another principal's lock is refused as well.
      expect(
        await sdkError(s3Other.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: key }))),
      ).toMatchObject({ name: 'OperationAborted', status: 409 });
      expect(await stateBody(unit)).toEqual(v1);
    });

    it("the holder's principal writes the state while holding the lock", async () => {
      const put = await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: v2 }));
      expect(put.$metadata.httpStatusCode).toBe(200);
      expect(await stateBody(unit)).toEqual(v2);
    });

    it('DeleteObject of the lock by another principal is a force-unlock: refused without the right (403), audited', async () => {
      expect(
        await sdkError(s3Other.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: lockKey }))),
      ).toMatchObject({ name: 'AccessDenied', status: 403 });
      expect(await readLock(s3)).toBe(held);
      await waitForAudit(
        (a) =>
          a.type === 'lock.force_unlock' &&
          a.outcome === 'denied' &&
          a.actor === 'svc:other' &&
          a.unit === unit,
      );
    });

    it('DeleteObject of the lock by an admin force-unlocks it (204), audited with the holder', async () => {
      const del = await s3Admin.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: lockKey }));
      expect(del.$metadata.httpStatusCode).toBe(204);
      expect(
        await sdkError(s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: lockKey }))),
      ).toMatchObject({ name: 'NoSuchKey', status: 404 });
      const event = await waitForAudit(
        (a) =>
          a.type === 'lock.force_unlock' &&
          a.outcome === 'success' &&
          a.actor === 'svc:s3-admin' &&
          a.unit === unit,
      );
      expect(event).toMatchObject({ door: 's3', workspace: 'default' });
      expect(event.details).toMatchObject({
        lock_id: JSON.parse(held).ID,
        holder: 'svc:main',
      });
      // With the lock gone, the other principal may write (serial 3 follows serial 2).
      await s3Other.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: v3 }));
      expect(await stateBody(unit)).toEqual(v3);
    });

    it('DeleteObject by the holder releases the lock, without a force-unlock', async () => {
      const info = lockInfo(randomUUID(), 'other@laptop', key);
      await lock(s3Other, info);
      expect(await readLock(s3)).toBe(info);
      const forcedBefore = auditEvents().filter((a) => a.type === 'lock.force_unlock').length;
      const del = await s3Other.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: lockKey }));
      expect(del.$metadata.httpStatusCode).toBe(204);
      expect(
        await sdkError(s3Other.send(new GetObjectCommand({ Bucket: BUCKET, Key: lockKey }))),
      ).toMatchObject({ name: 'NoSuchKey', status: 404 });
      // The lock is free again: main takes it.
      await lock(s3, lockInfo(randomUUID(), 'main@ci', key));
      await s3.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: lockKey }));
      await sleep(200);
      expect(auditEvents().filter((a) => a.type === 'lock.force_unlock').length).toBe(forcedBefore);
    });
  });
});

describe('secrets and the server output', () => {
  it('never contains a secret access key, a session token or a request signature', () => {
    const out = server.output();
    expect(issued.length).toBeGreaterThanOrEqual(3);
    for (const c of issued) {
      expect(out).not.toContain(c.SecretAccessKey);
      expect(out).not.toContain(c.SessionToken);
      for (const part of c.SessionToken.split('.')) {
        if (part.length >= 16) expect(out).not.toContain(part);
      }
    }
    expect(out).not.toMatch(/Signature=[0-9a-f]{64}/);
  });
});

/** RFC 3986 encoding of a query name or value, as SigV4 canonicalises it. */
function rfc3986(s: string): string {
  return encodeURIComponent(s).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}
