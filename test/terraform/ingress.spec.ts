/**
 * Statehouse behind an ingress: Debian's nginx, started here on loopback ports with exactly the
 * example configuration `deploy/nginx/statehouse.conf` (only addresses, ports and certificate
 * paths changed), terminates TLS (a throwaway CA and certificate made with openssl) in front of
 * two replicas on one PostgreSQL database (a throwaway cluster: scripts/with-postgres.sh, unless
 * DATABASE_URL names a server). Real `terraform` goes through it with `backend "s3"` (SigV4 over
 * the proxy, a workspace key with `%3A`, a state over nginx's default 1 MiB body limit) and
 * `backend "http"` (LOCK and UNLOCK methods); a chunked request body streams through; one
 * replica is killed (SIGKILL) in the middle of an apply and Terraform finishes through the
 * other; a repeated signed lock-object PUT (what a proxy that re-sends a failed request
 * does) is answered as the same lock; the audit log's client address comes from
 * X-Forwarded-For only from STATEHOUSE_TRUSTED_PROXIES.
 *
 * Two more nginx instances show the configuration's points are real: one in front of a replica
 * that trusts no proxy, and one with `proxy_set_header Host $host` — refused with
 * SignatureDoesNotMatch, as the README says.
 *
 * Without nginx, terraform or the PostgreSQL binaries this suite FAILS (it never skips).
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freshPostgresDatabase } from '../support/database';
import {
  findNginx,
  NGINX_EXAMPLE,
  NGINX_MISSING,
  renderExample,
  RunningNginx,
  startNginx,
} from '../support/nginx';
import { CLI, ROOT } from '../support/paths';
import { PostgresCluster, startPostgresCluster } from '../support/postgres-cluster';
import { RawRequest, s3Code, S3Creds, sendRaw, signS3 } from '../support/s3-signer';
import { NODE, RunningServer, spawnServer } from '../support/server';
import {
  cleanEnv,
  runTerraform,
  TERRAFORM,
  TERRAFORM_MISSING,
  TfResult,
} from '../support/terraform';
import { caAndServerCertificate } from '../support/tls';

jest.setTimeout(180_000);

interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

interface AuditItem {
  type: string;
  requestId: string | null;
  clientIp: string | null;
  unit: string | null;
}

/** A sizeable state: one resource whose input (and output) is ~1.1 MB, a state of ~2.3 MB. */
const BIG_CONFIG = `
variable "label" {
  type    = string
  default = "one"
}

variable "sleep_seconds" {
  type    = number
  default = 0
}

resource "terraform_data" "big" {
  input = sensitive(join("", [for i in range(1000) : join("", [for j in range(13) : format("%04d-%02d-abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789|", i, j)])]))
}

resource "terraform_data" "main" {
  input            = var.label
  triggers_replace = [var.label]

  provisioner "local-exec" {
    command = "sleep \${var.sleep_seconds}"
  }
}

output "label" {
  value = terraform_data.main.output
}
`;

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

describe('behind nginx: TLS at the proxy, two replicas on one PostgreSQL', () => {
  let pg: PostgresCluster | undefined;
  let dropDb: (() => Promise<void>) | undefined;
  let scratch: string;
  let caPem: Buffer;
  let caFile: string;
  let replicaA: RunningServer;
  let replicaB: RunningServer;
  /** A replica on the same database that trusts no proxy. */
  let untrusting: RunningServer;
  let proxy: RunningNginx;
  let untrustingProxy: RunningNginx;
  /** The example with `proxy_set_header Host $host` instead of `$http_host`. */
  let hostProxy: RunningNginx;
  /** The example with a path after the upstream: `proxy_pass http://statehouse/`. */
  let pathProxy: RunningNginx;
  let tfEnv: Record<string, string>;
  let token: string;
  let creds: S3Creds;
  const servers: RunningServer[] = [];
  const proxies: RunningNginx[] = [];
  const run = randomUUID().slice(0, 8);
  const FLAGS = ['-input=false', '-no-color'];

  /** An https request to one of the proxies (trusting the test CA). */
  function viaProxy(
    to: RunningNginx,
    path: string,
    init: {
      method?: string;
      headers?: Record<string, string>;
      body?: Buffer | string | (Buffer | string)[];
      localAddress?: string;
    } = {},
  ): Promise<Reply> {
    return new Promise((resolve, reject) => {
      const req = httpsRequest(
        {
          host: '127.0.0.1',
          port: to.port,
          path,
          method: init.method ?? 'GET',
          headers: init.headers,
          ca: caPem,
          agent: false,
          localAddress: init.localAddress,
        },
        (res) => {
          const parts: Buffer[] = [];
          res.on('data', (c: Buffer) => parts.push(c));
          res.once('error', reject);
          res.once('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              headers: res.headers,
              text: Buffer.concat(parts).toString('utf8'),
            }),
          );
        },
      );
      req.once('error', reject);
      if (Array.isArray(init.body)) {
        // Part by part, a moment apart: the body is still arriving when nginx passes it on.
        const parts = [...init.body];
        const next = (): void => {
          const part = parts.shift();
          if (part === undefined) req.end();
          else req.write(part, () => setTimeout(next, 300));
        };
        next();
      } else req.end(init.body);
    });
  }

  /** A signed S3 request through a proxy, exactly as prepared. */
  function sendSigned(to: RunningNginx, r: RawRequest): Promise<Reply> {
    return viaProxy(to, r.target, { method: r.method, headers: r.headers, body: r.body });
  }

  const api = (path: string, init: Parameters<typeof viaProxy>[2] = {}): Promise<Reply> =>
    viaProxy(proxy, path, {
      ...init,
      headers: { authorization: `Bearer ${token}`, ...init.headers },
    });

  async function auditOf(unit: string): Promise<AuditItem[]> {
    const r = await api(`/v1/audit?resource=${encodeURIComponent(unit)}`);
    expect(r.status).toBe(200);
    return (JSON.parse(r.text) as { items: AuditItem[] }).items;
  }

  /** The requests a replica logged (pino-http's finished-request lines). */
  function logged(
    server: RunningServer,
  ): { id?: string; method: string; url: string; status: number; contentLength?: string }[] {
    const out = [];
    for (const line of server.output().split('\n')) {
      if (!line.startsWith('{')) continue;
      try {
        const e = JSON.parse(line) as {
          req?: { id?: string; method?: string; url?: string; contentLength?: string };
          res?: { statusCode?: number };
        };
        if (e.req?.method && e.req.url && e.res?.statusCode !== undefined) {
          out.push({
            id: e.req.id,
            method: e.req.method,
            url: e.req.url,
            status: e.res.statusCode,
            contentLength: e.req.contentLength,
          });
        }
      } catch {
        // not a log line
      }
    }
    return out;
  }

  /** The request a replica logged with this X-Request-Id (waiting up to 3 s for its line). */
  async function arrivedAs(id: string): Promise<ReturnType<typeof logged>[number] | undefined> {
    const deadline = Date.now() + 3000;
    for (;;) {
      const found = [...logged(replicaA), ...logged(replicaB)].find((q) => q.id === id);
      if (found || Date.now() > deadline) return found;
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async function tfOk(cwd: string, args: string[]): Promise<TfResult> {
    const r = await runTerraform(cwd, args, tfEnv, 150_000);
    if (r.code !== 0) {
      throw new Error(
        `terraform ${args.join(' ')} exited ${r.code}:\n${r.output}\n` +
          `nginx access log:\n${proxy.accessLog().slice(-4000)}\nnginx error log:\n${proxy.errorLog().slice(-2000)}`,
      );
    }
    return r;
  }

  function workDir(name: string, backend: string): string {
    const dir = join(scratch, name);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'main.tf'), `terraform {${backend}\n}\n${BIG_CONFIG}`);
    return dir;
  }

  const s3Backend = (key: string): string => `
  backend "s3" {
    bucket                      = "tfstate"
    key                         = "${key}"
    region                      = "us-east-1"
    endpoints                   = { s3 = "${proxy.url}/s3" }
    use_path_style              = true
    skip_credentials_validation = true
    skip_requesting_account_id  = true
    skip_region_validation      = true
    skip_metadata_api_check     = true
    use_lockfile                = true
    profile                     = "sh"
    custom_ca_bundle            = "${caFile}"
  }`;

  const httpBackend = (unit: string): string => {
    const address = `${proxy.url}/v1/backend/${unit}`;
    return `
  backend "http" {
    address        = "${address}"
    lock_address   = "${address}"
    unlock_address = "${address}"
    username       = "terraform"
    client_ca_certificate_pem = <<-EOT
${caPem.toString('utf8')}EOT
  }`;
  };

  async function currentState(unit: string, workspace = 'default'): Promise<string> {
    const r = await api(`/v1/units/${encodeURIComponent(unit)}/state?workspace=${workspace}`);
    if (r.status !== 200) throw new Error(`state of ${unit}: ${r.status} ${r.text}`);
    return r.text;
  }

  beforeAll(async () => {
    if (findNginx() === undefined) throw new Error(NGINX_MISSING);
    if (TERRAFORM === undefined) throw new Error(TERRAFORM_MISSING);
    scratch = mkdtempSync(join(tmpdir(), 'statehouse-ingress-'));
    const certs = caAndServerCertificate(scratch);
    caFile = certs.ca;
    caPem = readFileSync(certs.ca);
    pg = await startPostgresCluster();
    const db = await freshPostgresDatabase(pg.url);
    dropDb = db.drop;
    const replica = async (name: string, env: Record<string, string>): Promise<RunningServer> => {
      const dataDir = join(scratch, `data-${name}`);
      mkdirSync(dataDir);
      const s = await spawnServer({
        DATABASE_URL: db.url,
        STATEHOUSE_DATA_DIR: dataDir,
        STATEHOUSE_STS_TTL: '1h',
        ...env,
      });
      servers.push(s);
      return s;
    };
    // The first one migrates; the others start on the migrated database.
    replicaA = await replica('a', { STATEHOUSE_TRUSTED_PROXIES: '127.0.0.1' });
    replicaB = await replica('b', { STATEHOUSE_TRUSTED_PROXIES: '127.0.0.1' });
    untrusting = await replica('c', {});
    const nginx = async (
      name: string,
      upstreams: [number, number],
      edits?: [string, string][],
    ): Promise<RunningNginx> => {
      const port = await freePort();
      const site = renderExample({ port, upstreams, cert: certs.cert, key: certs.key, edits });
      const n = await startNginx(join(scratch, `nginx-${name}`), port, site);
      proxies.push(n);
      return n;
    };
    proxy = await nginx('main', [replicaA.port, replicaB.port]);
    untrustingProxy = await nginx('untrusting', [untrusting.port, untrusting.port]);
    hostProxy = await nginx(
      'host',
      [replicaA.port, replicaB.port],
      [['proxy_set_header Host $http_host;', 'proxy_set_header Host $host;']],
    );
    pathProxy = await nginx(
      'path',
      [replicaA.port, replicaB.port],
      [['proxy_pass http://statehouse;', 'proxy_pass http://statehouse/;']],
    );

    // Terraform runs as svc:terraform (the RBAC admin) with an API token; its S3 credentials come
    // from `statehouse creds` through the proxy.
    token = replicaA.token;
    const init = await api('/v1/rbac/init', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ admin: { subject: 'svc:terraform' } }),
    });
    expect(init.status).toBe(201);
    const created = await api('/v1/auth/tokens', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'terraform', subject: 'svc:terraform' }),
    });
    expect(created.status).toBe(201);
    token = (JSON.parse(created.text) as { token: string }).token;
    const issued = await api('/v1/auth/issue-s3-creds', { method: 'POST' });
    expect(issued.status).toBe(200);
    creds = JSON.parse(issued.text) as S3Creds;

    const home = join(scratch, 'home');
    mkdirSync(home);
    writeFileSync(join(scratch, 'terraformrc'), '');
    writeFileSync(join(scratch, 'aws-credentials'), '');
    writeFileSync(
      join(scratch, 'aws-config'),
      [
        '[profile sh]',
        `credential_process = "${NODE}" "${CLI}" creds --json --server ${proxy.url}`,
        'region = us-east-1',
        '',
      ].join('\n'),
    );
    tfEnv = {
      ...cleanEnv(),
      HOME: home,
      XDG_CONFIG_HOME: join(home, 'xdg'),
      TF_CLI_CONFIG_FILE: join(scratch, 'terraformrc'),
      TF_IN_AUTOMATION: '1',
      CHECKPOINT_DISABLE: '1',
      AWS_CONFIG_FILE: join(scratch, 'aws-config'),
      AWS_SHARED_CREDENTIALS_FILE: join(scratch, 'aws-credentials'),
      AWS_EC2_METADATA_DISABLED: 'true',
      STATEHOUSE_TOKEN: token,
      TF_HTTP_PASSWORD: token,
      NODE_EXTRA_CA_CERTS: caFile,
    };
  }, 180_000);

  afterAll(async () => {
    for (const p of proxies) await p.stop();
    for (const s of servers) await s.stop();
    await dropDb?.().catch(() => undefined);
    await pg?.stop();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  it('the README shows deploy/nginx/statehouse.conf exactly', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    expect(readme).toContain('```nginx\n' + readFileSync(NGINX_EXAMPLE, 'utf8') + '```\n');
  });

  const s3Unit = `ingress/${run}/s3`;

  it('terraform backend "s3" through nginx: a 2 MB state, a workspace (env:/dev/…, its listing prefix env%3A%2F), both replicas serving', async () => {
    const dir = workDir('s3', s3Backend(`${s3Unit}/terraform.tfstate`));
    await tfOk(dir, ['init', ...FLAGS]);
    await tfOk(dir, ['apply', '-auto-approve', ...FLAGS]);
    const stored = await currentState(s3Unit);
    expect(stored.length).toBeGreaterThan(2_000_000); // over nginx's default 1m body limit
    const pulled = await tfOk(dir, ['state', 'pull']);
    expect(JSON.parse(pulled.stdout)).toEqual(JSON.parse(stored));
    const plan = await runTerraform(
      dir,
      ['plan', '-detailed-exitcode', '-input=false', '-no-color'],
      tfEnv,
    );
    expect({ code: plan.code, output: plan.code === 0 ? '' : plan.output }).toEqual({
      code: 0,
      output: '',
    });
    // env:/dev/<key>: Terraform lists with prefix=env%3A%2F; nginx passes it on as sent.
    await tfOk(dir, ['workspace', 'new', '-no-color', 'dev']);
    await tfOk(dir, ['apply', '-auto-approve', ...FLAGS, '-var', 'label=dev']);
    expect(JSON.parse(await currentState(s3Unit, 'dev'))).toMatchObject({
      outputs: { label: { value: 'dev' } },
    });
    const log = proxy.accessLog();
    expect(log).toMatch(/^PUT \/s3\/tfstate\/env:\/dev\/ingress\/\S+ 200 /m);
    expect(log).toMatch(/^GET \/s3\/tfstate\?list-type=2&max-keys=1000&prefix=env%3A%2F 200 /m);
    // Round robin: both replicas answered Terraform.
    for (const r of [replicaA, replicaB]) expect(log).toContain(`127.0.0.1:${r.port}`);
  });

  const httpUnit = `ingress/${run}/http`;

  it('terraform backend "http" through nginx: LOCK and UNLOCK pass through, a 2 MB state is stored', async () => {
    const dir = workDir('http', httpBackend(httpUnit));
    await tfOk(dir, ['init', ...FLAGS]);
    await tfOk(dir, ['apply', '-auto-approve', ...FLAGS]);
    expect((await currentState(httpUnit)).length).toBeGreaterThan(2_000_000);
    const path = `/v1/backend/${httpUnit}`;
    const log = proxy.accessLog();
    for (const method of ['LOCK', 'POST', 'UNLOCK']) {
      expect(log).toMatch(new RegExp(`^${method} ${path}(\\?\\S*)? 200 `, 'm'));
    }
    // The replicas saw Terraform's own methods, not something nginx made of them.
    const seen = [...logged(replicaA), ...logged(replicaB)].filter(
      (q) => q.url.split('?')[0] === path,
    );
    for (const method of ['LOCK', 'POST', 'UNLOCK']) {
      expect(seen.filter((q) => q.method === method).map((q) => q.status)).toEqual([200]);
    }
  });

  it('a chunked request body still arriving streams through to the replica as it comes (nginx buffers nothing and adds no Content-Length)', async () => {
    const unit = `ingress/${run}/chunked`;
    const id = `chunked-${run}`;
    const state = JSON.stringify({
      version: 4,
      terraform_version: '1.11.4',
      serial: 1,
      lineage: `l-${run}`,
      outputs: {},
      resources: [],
      check_results: null,
    });
    const half = Math.floor(state.length / 2);
    const r = await api(`/v1/backend/${unit}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'transfer-encoding': 'chunked',
        'x-request-id': id,
      },
      body: [state.slice(0, half), state.slice(half)],
    });
    expect(r.status).toBe(200);
    expect(await currentState(unit)).toBe(state);
    const arrived = await arrivedAs(id);
    expect(arrived).toMatchObject({ method: 'POST', status: 200 });
    expect(arrived?.contentLength).toBeUndefined();
  });

  it('proxy_set_header Host $host (the port dropped) is refused with SignatureDoesNotMatch; $http_host is not', async () => {
    const key = `ingress/${run}/host/terraform.tfstate`;
    const viaHost = await sendSigned(
      hostProxy,
      await signS3(hostProxy.port, creds, { method: 'GET', key }),
    );
    expect({ status: viaHost.status, code: s3Code(viaHost.text) }).toEqual({
      status: 403,
      code: 'SignatureDoesNotMatch',
    });
    const viaHttpHost = await sendSigned(
      proxy,
      await signS3(proxy.port, creds, { method: 'GET', key }),
    );
    expect({ status: viaHttpHost.status, code: s3Code(viaHttpHost.text) }).toEqual({
      status: 404,
      code: 'NoSuchKey',
    });
  });

  it('a path after the upstream (proxy_pass http://statehouse/) sends the decoded, normalised path: %3A arrives as ":", "//" as "/" and its signature fails; the example passes the path as sent', async () => {
    const get = async (to: RunningNginx, key: string, id: string) => {
      const signed = await signS3(to.port, creds, { method: 'GET', key });
      const r = await sendSigned(to, {
        ...signed,
        headers: { ...signed.headers, 'x-request-id': id },
      });
      // The replica logs a request once its answer is finished: a moment after the client has it.
      const arrived = await arrivedAs(id);
      return { status: r.status, code: s3Code(r.text), url: arrived?.url };
    };
    const colon = `env:/dev/ingress/${run}/path/terraform.tfstate`;
    // Statehouse re-encodes a decoded ':' (or '+') to check the signature; S3 itself does not.
    expect(await get(pathProxy, colon, `colon-path-${run}`)).toEqual({
      status: 404,
      code: 'NoSuchKey',
      url: `/s3/tfstate/${colon}`,
    });
    expect(await get(proxy, colon, `colon-example-${run}`)).toEqual({
      status: 404,
      code: 'NoSuchKey',
      url: `/s3/tfstate/${colon.replace(':', '%3A')}`,
    });
    const double = `ingress/${run}//path.tfstate`;
    expect(await get(pathProxy, double, `double-path-${run}`)).toMatchObject({
      status: 403,
      code: 'SignatureDoesNotMatch',
      url: `/s3/tfstate/${double.replace('//', '/')}`,
    });
    const example = await get(proxy, double, `double-example-${run}`);
    expect(example.url).toBe(`/s3/tfstate/${double}`);
    expect(example.code).not.toBe('SignatureDoesNotMatch');
  });

  describe('client addresses in the audit log', () => {
    // The client connects from 127.0.0.3; nginx connects to the replicas from 127.0.0.1.
    async function writeVia(
      to: RunningNginx,
      unit: string,
      requestId: string,
    ): Promise<AuditItem | undefined> {
      const r = await viaProxy(to, `/v1/backend/${unit}`, {
        method: 'POST',
        localAddress: '127.0.0.3',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          'x-request-id': requestId,
          // A client's own claim: nginx appends the address it saw.
          'x-forwarded-for': '203.0.113.7',
        },
        body: JSON.stringify({
          version: 4,
          terraform_version: '1.11.4',
          serial: 1,
          lineage: requestId,
          outputs: {},
          resources: [],
          check_results: null,
        }),
      });
      expect(r.status).toBe(200);
      return (await auditOf(unit)).find(
        (e) => e.requestId === requestId && e.type === 'state.write',
      );
    }

    it('replicas that trust the proxy record the client address nginx forwarded, not what the client claimed', async () => {
      const event = await writeVia(proxy, `ingress/${run}/ip-trusted`, `trusted-${run}`);
      expect(event?.clientIp).toBe('127.0.0.3');
    });

    it('a replica that trusts no proxy records the proxy address and believes no X-Forwarded-For', async () => {
      const event = await writeVia(
        untrustingProxy,
        `ingress/${run}/ip-untrusted`,
        `untrusted-${run}`,
      );
      expect(event?.clientIp).toBe('127.0.0.1');
    });
  });

  describe('a replica that fails: nginx re-sends a small PUT to the other one; one replica killed mid-apply', () => {
    it('a repeated signed lock-object PUT (a proxy re-sending it to the other replica) is the same lock, and the lock stays one', async () => {
      const key = `ingress/${run}/repeat/terraform.tfstate.tflock`;
      const lockId = randomUUID();
      const info = Buffer.from(
        JSON.stringify({
          ID: lockId,
          Operation: 'OperationTypeApply',
          Info: '',
          Who: 'ci@runner',
          Version: '1.11.4',
          Created: new Date().toISOString(),
          Path: key,
        }),
      );
      const put = await signS3(proxy.port, creds, {
        method: 'PUT',
        key,
        body: info,
        headers: { 'if-none-match': '*' },
      });
      const first = await sendSigned(proxy, put);
      expect(first.status).toBe(200);
      // The very same bytes again, at each replica (as nginx passes them: the signed Host).
      for (const r of [replicaA, replicaB]) {
        const again = await sendRaw(r.port, put);
        expect({ status: again.status, code: s3Code(again.text) }).toEqual({
          status: 200,
          code: undefined,
        });
        expect(again.headers.etag).toBe(first.headers.etag);
      }
      const held = await api(`/v1/units/${encodeURIComponent(`ingress/${run}/repeat`)}/lock`);
      expect(JSON.parse(held.text)).toMatchObject({ id: lockId });
      const acquired = (await auditOf(`ingress/${run}/repeat`)).filter(
        (e) => e.type === 'lock.acquire',
      );
      expect(acquired).toHaveLength(1);
      // Another lock ID with the same signature is impossible; a new request for another ID is refused.
      const other = Buffer.from(info.toString().replace(lockId, randomUUID()));
      const conflict = await sendSigned(
        proxy,
        await signS3(proxy.port, creds, {
          method: 'PUT',
          key,
          body: other,
          headers: { 'if-none-match': '*' },
        }),
      );
      expect({ status: conflict.status, code: s3Code(conflict.text) }).toEqual({
        status: 412,
        code: 'PreconditionFailed',
      });
      // Released, the same signed PUT may not take the lock again (a replay).
      const release = await sendSigned(
        proxy,
        await signS3(proxy.port, creds, { method: 'DELETE', key }),
      );
      expect(release.status).toBe(204);
      const replay = await sendRaw(replicaB.port, put);
      expect({ status: replay.status, code: s3Code(replay.text) }).toEqual({
        status: 403,
        code: 'AccessDenied',
      });
    });

    it('one replica killed (SIGKILL) in the middle of an apply: Terraform finishes, and its next command succeeds, through the other', async () => {
      const unit = `ingress/${run}/kill`;
      const dir = workDir('kill', s3Backend(`${unit}/terraform.tfstate`));
      await tfOk(dir, ['init', ...FLAGS]);
      await tfOk(dir, ['apply', '-auto-approve', ...FLAGS]);
      // The apply holds the lock while its provisioner sleeps; replica A dies meanwhile.
      const apply = tfOk(dir, [
        'apply',
        '-auto-approve',
        ...FLAGS,
        '-var',
        'label=two',
        '-var',
        'sleep_seconds=6',
      ]);
      const holding = Date.now() + 60_000;
      while ((await api(`/v1/units/${encodeURIComponent(unit)}/lock`)).status !== 200) {
        if (Date.now() > holding) throw new Error('the apply never took the lock');
        await new Promise((r) => setTimeout(r, 100));
      }
      await replicaA.kill();
      expect(replicaA.proc.signalCode).toBe('SIGKILL');
      await apply;
      // nginx found replica A gone (refused, or closed mid-answer) and passed the requests on to B.
      expect(proxy.errorLog()).toMatch(
        new RegExp(`\\[error\\].*upstream: "http://127\\.0\\.0\\.1:${replicaA.port}/`),
      );
      expect(JSON.parse(await currentState(unit))).toMatchObject({
        outputs: { label: { value: 'two' } },
      });
      const plan = await runTerraform(
        dir,
        ['plan', '-detailed-exitcode', '-input=false', '-no-color', '-var', 'label=two'],
        tfEnv,
      );
      expect({ code: plan.code, output: plan.code === 0 ? '' : plan.output }).toEqual({
        code: 0,
        output: '',
      });
      await tfOk(dir, ['apply', '-auto-approve', ...FLAGS, '-var', 'label=three']);
      expect(JSON.parse(await currentState(unit))).toMatchObject({
        outputs: { label: { value: 'three' } },
      });
      expect((await api(`/v1/units/${encodeURIComponent(unit)}/lock`)).status).toBe(404);
    });
  });
});
