/**
 * The dependency graph with real Terraform (the `terraform` binary on the PATH, 1.11.x): the
 * README's worked example, end to end. Two root modules, both with `backend "s3"` on the `/s3`
 * door of one Statehouse server:
 *
 *   network (key platform/network/terraform.tfstate): output vpc_id = var.vpc_id ("vpc-1")
 *   app     (key apps/web/terraform.tfstate): data "terraform_remote_state" "network" with
 *           backend = "s3" reading platform/network from the same server; output vpc_id from it
 *
 * The credentials are short-lived S3 credentials printed by `statehouse creds --json` (the real
 * CLI, with an API token of svc:terraform as STATEHOUSE_TOKEN) and handed to Terraform as
 * AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN: no secret is in the HCL.
 *
 * The steps run in order and build on each other:
 *   1. apply network (vpc-1), then app: the server discovers the edge platform/network →
 *      apps/web from the consumer's state; apps/web is green, its input ok; /v1/graph shows it;
 *      the consumer's stored state really holds the remote-state config;
 *   2. apply network with vpc_id = "vpc-2": apps/web is red, its input stale, changed
 *      ["vpc_id"] (not the unchanged `cidr`), stale since the producer's current version;
 *      /v1/graph/stale lists it;
 *   3. apply app again (it reads vpc-2): green, and the stale list is empty.
 * Then the same, shorter, with the data source on `backend "http"` (address, username, and an
 * API token as password, given as a sensitive variable through TF_VAR_…): the edge is found
 * the same way, and the password appears in no graph answer and no server log line. No graph
 * answer contains the AWS secret key or session token either.
 *
 * No provider is downloaded: only the built-in `terraform_data` resource, the built-in
 * `terraform_remote_state` data source and `output` blocks. Every command runs with an empty
 * CLI config file, TF_IN_AUTOMATION=1, CHECKPOINT_DISABLE=1, -input=false and -no-color, in an
 * environment without the caller's TF_*, AWS_* and STATEHOUSE_* settings. Without `terraform`
 * on the PATH this suite FAILS (it never skips).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freshServerEnv } from '../support/database';
import {
  cleanEnv,
  runTerraformOk,
  TERRAFORM,
  TERRAFORM_MISSING,
  TfResult,
  wholeVersionList,
} from '../support/terraform';
import { RunningServer, runCli, spawnServer } from '../support/server';

jest.setTimeout(180_000);

interface ProcessCredentials {
  Version: number;
  AccessKeyId: string;
  SecretAccessKey: string;
  SessionToken: string;
  Expiration: string;
}

interface NodeRef {
  unit: string;
  workspace: string;
}

interface Input {
  edge: string | null;
  producer: NodeRef | { hidden: true };
  source: string;
  name: string | null;
  status: 'ok' | 'stale' | 'unknown';
  changed: string[];
  staleSince: number | null;
}

interface Status {
  unit: string;
  workspace: string;
  status: 'green' | 'red' | 'yellow';
  inputs: Input[];
  redUpstream: NodeRef[];
  hiddenRedUpstream: number;
  cycles: NodeRef[][];
}

interface Graph {
  nodes: { unit: string; workspace: string; status: string; version: number | null }[];
  edges: {
    id: string;
    producer: NodeRef;
    consumer: NodeRef;
    source: string;
    name: string;
    status: string;
    changed: string[];
    producerVersion: number | null;
  }[];
  cycles: NodeRef[][];
}

interface Stale {
  items: { unit: string; workspace: string; status: string; inputs: Input[] }[];
  cycles: NodeRef[][];
}

interface VersionItem {
  version: number;
  serial: number | null;
  door: string;
}

interface StateFile {
  serial: number;
  outputs: Record<string, { value: unknown }>;
  resources: {
    mode: string;
    type: string;
    name: string;
    instances: { attributes: Record<string, unknown> }[];
  }[];
}

// ------------------------------------------------------------------ the root modules

/** The `backend "s3"` block of a root module: the `/s3` door of the server at `url`. */
const s3Backend = (url: string, key: string): string => `terraform {
  backend "s3" {
    bucket                      = "tfstate"
    key                         = "${key}"
    region                      = "us-east-1"
    endpoints                   = { s3 = "${url}/s3" }
    use_path_style              = true
    use_lockfile                = true
    skip_credentials_validation = true
    skip_requesting_account_id  = true
    skip_region_validation      = true
    skip_metadata_api_check     = true
  }
}
`;

/** The producer: a VPC id that can change, and an output that never does. */
const NETWORK = `
variable "vpc_id" {
  type    = string
  default = "vpc-1"
}

resource "terraform_data" "vpc" {
  input = var.vpc_id
}

output "vpc_id" {
  value = terraform_data.vpc.output
}

output "cidr" {
  value = "10.0.0.0/16"
}
`;

/** The consumer's use of what it read. */
const APP_BODY = `
resource "terraform_data" "web" {
  input = data.terraform_remote_state.network.outputs.vpc_id
}

output "vpc_id" {
  value = data.terraform_remote_state.network.outputs.vpc_id
}
`;

/** The consumer reading the producer's state through the `/s3` door. */
const s3RemoteState = (url: string, key: string): string => `
data "terraform_remote_state" "network" {
  backend = "s3"
  config = {
    bucket                      = "tfstate"
    key                         = "${key}"
    region                      = "us-east-1"
    endpoints                   = { s3 = "${url}/s3" }
    use_path_style              = true
    skip_credentials_validation = true
    skip_requesting_account_id  = true
    skip_region_validation      = true
    skip_metadata_api_check     = true
  }
}
`;

/** The consumer reading the producer's state through the HTTP backend, with an API token. */
const httpRemoteState = (url: string, unit: string): string => `
variable "statehouse_token" {
  type      = string
  sensitive = true
}

data "terraform_remote_state" "network" {
  backend = "http"
  config = {
    address  = "${url}/v1/backend/${unit}"
    username = "terraform"
    password = var.statehouse_token
  }
}
`;

describe('the dependency graph with real terraform (README worked example)', () => {
  let server: RunningServer;
  let cleanup: (() => Promise<void>) | undefined;
  let scratch: string | undefined;
  let tfEnv: Record<string, string>;
  let creds: ProcessCredentials;
  /** The body of every graph answer (/v1/graph…, /v1/units/…/status), searched for secrets. */
  const graphAnswers: string[] = [];
  const enc = encodeURIComponent;

  // ---------------------------------------------------------------- helpers

  /** Runs terraform and fails with its whole output (and where it ran) unless it exits 0. */
  const tfOk = (cwd: string, args: string[]): Promise<TfResult> =>
    runTerraformOk(cwd, args, tfEnv, { timeoutMs: 120_000, showCwd: true });

  const initArgs = ['init', '-input=false', '-no-color'];
  const applyArgs = (...extra: string[]): string[] => [
    'apply',
    '-auto-approve',
    '-input=false',
    '-no-color',
    ...extra,
  ];

  /** A root module in its own directory under the scratch dir. */
  function rootModule(name: string, hcl: string): string {
    const dir = join(scratch as string, name);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'main.tf'), hcl);
    return dir;
  }

  /** The management API with the bootstrap token: status and body. */
  async function api(
    path: string,
    init: { method?: string; body?: unknown } = {},
  ): Promise<{ status: number; text: string }> {
    const r = await fetch(`${server.url}${path}`, {
      method: init.method ?? 'GET',
      headers: { ...server.auth, 'Content-Type': 'application/json' },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    });
    return { status: r.status, text: await r.text() };
  }

  /** A graph answer (kept for the secret search), parsed; fails unless it is a 200. */
  async function graphApi<T>(path: string): Promise<T> {
    const r = await api(path);
    graphAnswers.push(r.text);
    if (r.status !== 200) throw new Error(`GET ${path}: ${r.status} ${r.text}`);
    return JSON.parse(r.text) as T;
  }

  const status = (unit: string): Promise<Status> =>
    graphApi<Status>(`/v1/units/${enc(unit)}/status`);
  const graph = (prefix: string): Promise<Graph> =>
    graphApi<Graph>(`/v1/graph?prefix=${enc(prefix)}`);
  const stale = (): Promise<Stale> => graphApi<Stale>('/v1/graph/stale');

  async function versions(unit: string): Promise<VersionItem[]> {
    const r = await api(`/v1/units/${enc(unit)}/versions`);
    if (r.status !== 200) throw new Error(`versions of ${unit}: ${r.status} ${r.text}`);
    return wholeVersionList(
      JSON.parse(r.text) as { items: VersionItem[]; nextCursor: string | null },
    );
  }

  async function currentState(unit: string): Promise<{ text: string; state: StateFile }> {
    const r = await api(`/v1/units/${enc(unit)}/state`);
    if (r.status !== 200) throw new Error(`state of ${unit}: ${r.status} ${r.text}`);
    return { text: r.text, state: JSON.parse(r.text) as StateFile };
  }

  const latest = async (unit: string): Promise<number> => {
    const list = await versions(unit);
    return list[list.length - 1].version;
  };

  // ---------------------------------------------------------------- lifecycle

  beforeAll(async () => {
    if (TERRAFORM === undefined) throw new Error(TERRAFORM_MISSING);
    scratch = mkdtempSync(join(tmpdir(), 'statehouse-tf-graph-'));
    const home = join(scratch, 'home');
    mkdirSync(home, { recursive: true });
    const fresh = await freshServerEnv();
    cleanup = fresh.cleanup;
    server = await spawnServer({ ...fresh.env, STATEHOUSE_STS_TTL: '1h' });

    // Short-lived S3 credentials, exactly as a pipeline gets them: `statehouse creds --json`
    // with its API token (bootstrap-admin mints none).
    const created = await api('/v1/auth/tokens', {
      method: 'POST',
      body: { name: 'terraform', subject: 'svc:terraform' },
    });
    expect(created.status).toBe(201);
    const issued = await runCli(['creds', '--json', '--server', server.url], {
      STATEHOUSE_TOKEN: (JSON.parse(created.text) as { token: string }).token,
      HOME: home,
      XDG_CONFIG_HOME: join(home, 'xdg'),
    });
    if (issued.code !== 0) throw new Error(`statehouse creds failed:\n${issued.output}`);
    creds = JSON.parse(issued.output) as ProcessCredentials;
    expect(creds.SecretAccessKey.length).toBeGreaterThan(10);
    expect(creds.SessionToken.length).toBeGreaterThan(10);

    const cliConfig = join(scratch, 'terraformrc');
    writeFileSync(cliConfig, '');
    tfEnv = {
      // The CA overrides stay: only TF_*, AWS_*, STATEHOUSE_* and DATABASE_URL go.
      ...cleanEnv(['TF_*', 'AWS_*', 'STATEHOUSE_*', 'DATABASE_URL']),
      HOME: home,
      XDG_CONFIG_HOME: join(home, 'xdg'),
      TF_CLI_CONFIG_FILE: cliConfig,
      TF_IN_AUTOMATION: '1',
      CHECKPOINT_DISABLE: '1',
      AWS_ACCESS_KEY_ID: creds.AccessKeyId,
      AWS_SECRET_ACCESS_KEY: creds.SecretAccessKey,
      AWS_SESSION_TOKEN: creds.SessionToken,
      AWS_EC2_METADATA_DISABLED: 'true',
      // No shared config or credentials files: the environment's keys are the only ones.
      AWS_CONFIG_FILE: join(home, 'aws-config-none'),
      AWS_SHARED_CREDENTIALS_FILE: join(home, 'aws-credentials-none'),
    };
  }, 120_000);

  afterAll(async () => {
    await server?.stop();
    await cleanup?.();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  it('has terraform 1.x on the PATH', async () => {
    const r = await tfOk(scratch as string, ['version', '-json']);
    const version = (JSON.parse(r.stdout) as { terraform_version: string }).terraform_version;
    expect(version).toMatch(/^1\.\d+\.\d+/);
  });

  // ---------------------------------------------------------------- through backend "s3"

  describe('a consumer reading its producer through terraform_remote_state with backend "s3"', () => {
    const producer = 'platform/network';
    const consumer = 'apps/web';
    const producerKey = `${producer}/terraform.tfstate`;
    let networkDir: string;
    let appDir: string;

    it('1. the producer (platform/network, vpc_id = "vpc-1") is applied: version 1', async () => {
      networkDir = rootModule('network', s3Backend(server.url, producerKey) + NETWORK);
      const init = await tfOk(networkDir, initArgs);
      expect(init.stdout).toMatch(/Successfully configured the backend "s3"!/);
      const applied = await tfOk(networkDir, applyArgs());
      expect(applied.stdout).toMatch(/Apply complete! Resources: 1 added, 0 changed, 0 destroyed/);
      expect((await versions(producer)).map((v) => [v.version, v.door])).toEqual([[1, 's3']]);
      const { state } = await currentState(producer);
      expect(state.outputs.vpc_id.value).toBe('vpc-1');
      expect(state.outputs.cidr.value).toBe('10.0.0.0/16');
    });

    it('2. the consumer (apps/web) reads vpc_id through terraform_remote_state and is applied', async () => {
      appDir = rootModule(
        'app',
        s3Backend(server.url, `${consumer}/terraform.tfstate`) +
          s3RemoteState(server.url, producerKey) +
          APP_BODY,
      );
      await tfOk(appDir, initArgs);
      const applied = await tfOk(appDir, applyArgs());
      expect(applied.stdout).toMatch(/Apply complete! Resources: 1 added, 0 changed, 0 destroyed/);
      expect(applied.stdout).toMatch(/vpc_id = "vpc-1"/);
      expect((await versions(consumer)).map((v) => [v.version, v.door])).toEqual([[1, 's3']]);
    });

    it('3. apps/web is green with one input from platform/network (ok); /v1/graph shows the discovered edge', async () => {
      const s = await status(consumer);
      expect(s).toMatchObject({
        unit: consumer,
        workspace: 'default',
        status: 'green',
        redUpstream: [],
        cycles: [],
      });
      expect(s.inputs).toEqual([
        expect.objectContaining({
          producer: { unit: producer, workspace: 'default' },
          source: 'discovered',
          name: 'network',
          status: 'ok',
          changed: [],
          staleSince: null,
        }),
      ]);

      const g = await graph('apps/');
      expect(g.edges).toEqual([
        expect.objectContaining({
          id: s.inputs[0].edge,
          producer: { unit: producer, workspace: 'default' },
          consumer: { unit: consumer, workspace: 'default' },
          source: 'discovered',
          name: 'network',
          status: 'ok',
          changed: [],
          producerVersion: 1,
        }),
      ]);
      expect(g.nodes.map((n) => [n.unit, n.workspace, n.status])).toEqual([
        [consumer, 'default', 'green'],
        [producer, 'default', 'green'],
      ]);
      expect(g.nodes.find((n) => n.unit === producer)?.version).toBe(1);
      expect(g.cycles).toEqual([]);
      expect(await stale()).toEqual({ items: [], cycles: [] });
    });

    it("the consumer's stored state holds the remote-state config Terraform used (and no secret)", async () => {
      const { text, state } = await currentState(consumer);
      const remote = state.resources.filter(
        (r) => r.mode === 'data' && r.type === 'terraform_remote_state',
      );
      expect(remote.map((r) => r.name)).toEqual(['network']);
      const attrs = remote[0].instances[0].attributes;
      expect(attrs.backend).toBe('s3');
      expect((attrs.config as { value: unknown }).value).toEqual({
        bucket: 'tfstate',
        key: producerKey,
        region: 'us-east-1',
        endpoints: { s3: `${server.url}/s3` },
        use_path_style: true,
        skip_credentials_validation: true,
        skip_requesting_account_id: true,
        skip_region_validation: true,
        skip_metadata_api_check: true,
      });
      expect((attrs.outputs as { value: unknown }).value).toEqual({
        vpc_id: 'vpc-1',
        cidr: '10.0.0.0/16',
      });
      expect(state.outputs.vpc_id.value).toBe('vpc-1');
      // The credentials came from the environment: Terraform kept none of them in the state.
      expect(text).not.toContain(creds.SecretAccessKey);
      expect(text).not.toContain(creds.SessionToken);
    });

    it('4. the producer changes vpc_id to "vpc-2": apps/web is red, vpc_id stale since the current producer version', async () => {
      const applied = await tfOk(networkDir, applyArgs('-var', 'vpc_id=vpc-2'));
      expect(applied.stdout).toMatch(/Apply complete!/);
      expect(applied.stdout).toMatch(/vpc_id = "vpc-2"/);
      // One apply, one version: the producer is now at version 2.
      expect((await versions(producer)).map((v) => [v.version, v.door])).toEqual([
        [1, 's3'],
        [2, 's3'],
      ]);
      const current = await latest(producer);
      expect((await currentState(producer)).state.outputs.vpc_id.value).toBe('vpc-2');

      const s = await status(consumer);
      expect(s.status).toBe('red');
      expect(s.inputs).toEqual([
        expect.objectContaining({
          producer: { unit: producer, workspace: 'default' },
          source: 'discovered',
          name: 'network',
          status: 'stale',
          changed: ['vpc_id'],
          staleSince: current,
        }),
      ]);

      const g = await graph('apps/');
      expect(g.edges.map((e) => [e.producer.unit, e.status, e.changed, e.producerVersion])).toEqual(
        [[producer, 'stale', ['vpc_id'], 1]],
      );

      const list = await stale();
      expect(list.cycles).toEqual([]);
      expect(list.items.map((i) => [i.unit, i.workspace, i.status])).toEqual([
        [consumer, 'default', 'red'],
      ]);
      expect(list.items[0].inputs).toEqual([
        expect.objectContaining({
          producer: { unit: producer, workspace: 'default' },
          status: 'stale',
          changed: ['vpc_id'],
          staleSince: current,
        }),
      ]);
    });

    it('5. applying the consumer again (it reads vpc-2) makes it green; the stale list is empty', async () => {
      const applied = await tfOk(appDir, applyArgs());
      expect(applied.stdout).toMatch(/Apply complete!/);
      expect(applied.stdout).toMatch(/vpc_id = "vpc-2"/);
      expect((await currentState(consumer)).state.outputs.vpc_id.value).toBe('vpc-2');

      const s = await status(consumer);
      expect(s.status).toBe('green');
      expect(s.inputs).toEqual([
        expect.objectContaining({
          producer: { unit: producer, workspace: 'default' },
          status: 'ok',
          changed: [],
          staleSince: null,
        }),
      ]);
      const g = await graph('apps/');
      expect(g.edges.map((e) => [e.producer.unit, e.status, e.producerVersion])).toEqual([
        [producer, 'ok', await latest(producer)],
      ]);
      expect(await stale()).toEqual({ items: [], cycles: [] });
    });
  });

  // ---------------------------------------------------------------- through backend "http"

  describe('a consumer reading its producer through terraform_remote_state with backend "http"', () => {
    const producer = 'platform/shared';
    const consumer = 'apps/api';
    let password: string;
    let networkDir: string;
    let appDir: string;

    it('the edge is discovered from an http address; the producer changing turns the consumer red, applying it green', async () => {
      const created = await api('/v1/auth/tokens', {
        method: 'POST',
        body: { name: 'remote-state-reader', subject: 'svc:remote-state-reader' },
      });
      expect(created.status).toBe(201);
      password = (JSON.parse(created.text) as { token: string }).token;
      expect(password.length).toBeGreaterThan(10);

      networkDir = rootModule(
        'network-shared',
        s3Backend(server.url, `${producer}/terraform.tfstate`) + NETWORK,
      );
      await tfOk(networkDir, initArgs);
      await tfOk(networkDir, applyArgs());

      appDir = rootModule(
        'app-http',
        s3Backend(server.url, `${consumer}/terraform.tfstate`) +
          httpRemoteState(server.url, producer) +
          APP_BODY,
      );
      // The password reaches Terraform through the environment, as a sensitive variable.
      tfEnv.TF_VAR_statehouse_token = password;
      await tfOk(appDir, initArgs);
      const first = await tfOk(appDir, applyArgs());
      expect(first.stdout).toMatch(/vpc_id = "vpc-1"/);

      const { state } = await currentState(consumer);
      const remote = state.resources.find(
        (r) => r.mode === 'data' && r.type === 'terraform_remote_state',
      );
      expect(remote?.instances[0].attributes.backend).toBe('http');
      expect(
        (remote?.instances[0].attributes.config as { value: Record<string, unknown> }).value
          .address,
      ).toBe(`${server.url}/v1/backend/${producer}`);

      const green = await status(consumer);
      expect(green.status).toBe('green');
      expect(green.inputs).toEqual([
        expect.objectContaining({
          producer: { unit: producer, workspace: 'default' },
          source: 'discovered',
          name: 'network',
          status: 'ok',
        }),
      ]);
      expect((await graph(consumer)).edges).toEqual([
        expect.objectContaining({
          producer: { unit: producer, workspace: 'default' },
          consumer: { unit: consumer, workspace: 'default' },
          source: 'discovered',
          status: 'ok',
          producerVersion: 1,
        }),
      ]);

      await tfOk(networkDir, applyArgs('-var', 'vpc_id=vpc-2'));
      const current = await latest(producer);
      const red = await status(consumer);
      expect(red.status).toBe('red');
      expect(red.inputs).toEqual([
        expect.objectContaining({ status: 'stale', changed: ['vpc_id'], staleSince: current }),
      ]);
      expect((await stale()).items.map((i) => [i.unit, i.status])).toEqual([[consumer, 'red']]);

      const second = await tfOk(appDir, applyArgs());
      expect(second.stdout).toMatch(/vpc_id = "vpc-2"/);
      expect((await status(consumer)).status).toBe('green');
      expect(await stale()).toEqual({ items: [], cycles: [] });
    });

    it('the remote-state password is in no graph answer and no server log line', async () => {
      // Every graph answer there is, once more, for good measure.
      await graph('');
      await stale();
      for (const u of ['platform/network', 'apps/web', producer, consumer]) await status(u);
      expect(password).toBeDefined();
      expect(graphAnswers.join('\n')).not.toContain(password);
      expect(server.output()).not.toContain(password);
    });
  });

  it('no graph answer contains the AWS secret access key or session token', () => {
    expect(graphAnswers.length).toBeGreaterThan(10);
    const all = graphAnswers.join('\n');
    expect(all).not.toContain(creds.SecretAccessKey);
    expect(all).not.toContain(creds.SessionToken);
    expect(server.output()).not.toContain(creds.SecretAccessKey);
    expect(server.output()).not.toContain(creds.SessionToken);
  });
});
