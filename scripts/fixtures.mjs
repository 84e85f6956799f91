// `npm run fixtures [-- --out DIR]`: writes the Terraform state fixtures of test/fixtures/ again
// with the real `terraform` binary on the PATH, so they can be refreshed for a new Terraform
// version. Default DIR: test/fixtures/terraform-<major.minor of that terraform>.
//
// No provider is downloaded (none could be here): only the built-in `terraform_data` resource,
// the built-in `terraform_remote_state` data source, `check` blocks, a `local-exec` provisioner
// and outputs, with an empty CLI config file (TF_CLI_CONFIG_FILE), TF_IN_AUTOMATION=1,
// CHECKPOINT_DISABLE=1 and none of the caller's TF_*, AWS_* or STATEHOUSE_* settings.
//
//   simple.tfstate            local backend: outputs of several types (one sensitive),
//                             `for_each` instances, a passing `check` block
//   deposed.tfstate           local backend: two `create_before_destroy` resources; the second
//                             apply replaces both and the replacement of `slow` fails (its
//                             provisioner exits 1), so both keep a deposed instance
//   producer-network.tfstate  written through `backend "s3"` to a Statehouse server started for
//                             the occasion (this repository's dist/, on a temporary embedded
//                             database), read back through the API byte for byte
//   producer-dns.tfstate      the same through `backend "http"`
//   consumer.tfstate          local backend: `terraform_remote_state` through `s3` and `http`
//                             from that server
//
// Hand edits (the only ones): in consumer.tfstate the server's address (a random port) becomes
// http://127.0.0.1:8080 in both data sources' configs, and the http data source's password (an
// API token of that throwaway server) becomes "tok".
//
// Not made: opentofu-encrypted.HANDMADE.tfstate (OpenTofu's client-side encryption envelope)
// needs the `tofu` binary, which is not here: it is kept as it is (copied when DIR is new).
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { buildIfStale, captureOutput, CLI, root } from './lib/bench-common.mjs';

const CURRENT = join(root, 'test', 'fixtures', 'terraform-1.11');
const HANDMADE = 'opentofu-encrypted.HANDMADE.tfstate';
const PUBLISHED_BASE = 'http://127.0.0.1:8080';
const PUBLISHED_PASSWORD = 'tok';

const args = process.argv.slice(2);
const outArg = args.indexOf('--out');
if (args.includes('--help') || args.includes('-h')) {
  process.stdout.write('usage: npm run fixtures [-- --out DIR]\n');
  process.exit(0);
}

class FixtureError extends Error {}
function fail(message) {
  throw new FixtureError(message);
}

let tfVersion;
try {
  tfVersion = JSON.parse(
    execFileSync('terraform', ['version', '-json'], {
      encoding: 'utf8',
      env: { ...process.env, TF_CLI_CONFIG_FILE: '/dev/null', CHECKPOINT_DISABLE: '1' },
    }),
  ).terraform_version;
} catch (e) {
  // Nothing started yet: stop here.
  process.stderr.write(
    `fixtures: the real terraform binary is needed on the PATH (${e.message})\n`,
  );
  process.exit(1);
}
const [major, minor] = tfVersion.split('.');
const outDir = resolve(
  outArg >= 0 ? args[outArg + 1] : join(root, 'test', 'fixtures', `terraform-${major}.${minor}`),
);

const work = mkdtempSync(join(tmpdir(), 'statehouse-fixtures-'));
const cliConfig = join(work, 'terraformrc');
writeFileSync(cliConfig, '');
let server;

/** The caller's environment without Terraform, AWS or Statehouse settings. */
function cleanEnv(extra = {}) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!/^(TF_|AWS_|STATEHOUSE_)/.test(k) && k !== 'DATABASE_URL') env[k] = v;
  }
  return {
    ...env,
    TF_CLI_CONFIG_FILE: cliConfig,
    TF_IN_AUTOMATION: '1',
    CHECKPOINT_DISABLE: '1',
    ...extra,
  };
}

/** Runs terraform in `dir`; `mayFail` for the apply that is meant to fail. */
function terraform(dir, tfArgs, env = {}, mayFail = false) {
  try {
    execFileSync('terraform', [...tfArgs, '-no-color'], {
      cwd: dir,
      env: cleanEnv(env),
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    if (mayFail) fail(`terraform ${tfArgs.join(' ')} in ${dir} was meant to fail and did not`);
  } catch (e) {
    if (mayFail && e.status) return;
    fail(`terraform ${tfArgs.join(' ')} in ${dir} failed:\n${e.stdout ?? ''}${e.stderr ?? ''}`);
  }
}

function rootModule(name, hcl) {
  const dir = join(work, name);
  mkdirSync(dir);
  writeFileSync(join(dir, 'main.tf'), hcl);
  return dir;
}

const apply = ['apply', '-auto-approve', '-input=false'];
const init = ['init', '-input=false'];

// ------------------------------------------------------------------ the server

async function startServer() {
  buildIfStale();
  const token = `fixtures-${randomBytes(24).toString('base64url')}`;
  const proc = spawn(process.execPath, [CLI, 'serve'], {
    env: cleanEnv({
      NODE_ENV: 'production',
      PORT: '0',
      STATEHOUSE_HOST: '127.0.0.1',
      STATEHOUSE_DATA_DIR: join(work, 'server'),
      STATEHOUSE_BOOTSTRAP_TOKEN: token,
      STATEHOUSE_LOG_FORMAT: 'json',
    }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const log = captureOutput(proc);
  server = proc;
  const deadline = Date.now() + 120_000;
  let port;
  while (!port) {
    if (proc.exitCode !== null) fail(`the server exited (${proc.exitCode}):\n${log()}`);
    if (Date.now() > deadline) fail(`the server did not start:\n${log()}`);
    port = /listening on http:\/\/[^:]+:(\d+)/.exec(log())?.[1];
    await new Promise((r) => setTimeout(r, 100));
  }
  const url = `http://127.0.0.1:${port}`;
  const call = async (method, path, bearer, body) => {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: {
        Authorization: `Bearer ${bearer}`,
        ...(body ? { 'Content-Type': 'application/json' } : {}),
      },
      body: body ? JSON.stringify(body) : undefined,
    });
    if (!res.ok) fail(`${method} ${path}: ${res.status} ${await res.text()}`);
    return res;
  };
  // The bootstrap token mints no S3 credentials: Terraform uses an API token of its own.
  const apiToken = (
    await (
      await call('POST', '/v1/auth/tokens', token, { name: 'fixtures', subject: 'svc:fixtures' })
    ).json()
  ).token;
  const creds = await (await call('POST', '/v1/auth/issue-s3-creds', apiToken)).json();
  return {
    url,
    apiToken,
    awsEnv: {
      AWS_ACCESS_KEY_ID: creds.AccessKeyId,
      AWS_SECRET_ACCESS_KEY: creds.SecretAccessKey,
      AWS_SESSION_TOKEN: creds.SessionToken,
    },
    state: async (unit) =>
      Buffer.from(
        await (
          await call('GET', `/v1/units/${encodeURIComponent(unit)}/state`, apiToken)
        ).arrayBuffer(),
      ),
  };
}

function stopServer() {
  if (!server || server.exitCode !== null || server.signalCode !== null) return Promise.resolve();
  const exited = new Promise((r) => server.once('exit', r));
  server.kill('SIGTERM');
  return exited;
}

const s3Config = (url, key) => `
    bucket = "tfstate"
    key    = "${key}"
    region = "us-east-1"
    endpoints      = { s3 = "${url}/s3" }
    use_path_style = true
    skip_credentials_validation = true
    skip_requesting_account_id  = true
    skip_region_validation      = true
    skip_metadata_api_check     = true`;

// ------------------------------------------------------------------ the fixtures

async function main() {
  const made = new Map();

  const simple = rootModule(
    'simple',
    `variable "cidr" { default = "10.0.0.0/16" }
resource "terraform_data" "network" {
  input = { cidr = var.cidr, name = "core" }
}
resource "terraform_data" "subnet" {
  for_each = { a = "10.0.1.0/24", b = "10.0.2.0/24" }
  input    = each.value
}
check "cidr_is_private" {
  assert {
    condition     = startswith(var.cidr, "10.")
    error_message = "not a private range"
  }
}
output "vpc_cidr" { value = terraform_data.network.output.cidr }
output "subnets" { value = { for k, s in terraform_data.subnet : k => s.output } }
output "db_password" {
  value     = "s3cr3t-not-real"
  sensitive = true
}
`,
  );
  terraform(simple, init);
  terraform(simple, apply);
  made.set('simple.tfstate', readFileSync(join(simple, 'terraform.tfstate')));

  const deposed = rootModule(
    'deposed',
    `variable "generation" { default = "1" }
resource "terraform_data" "app" {
  triggers_replace = var.generation
  lifecycle { create_before_destroy = true }
}
resource "terraform_data" "slow" {
  triggers_replace = terraform_data.app.id
  lifecycle { create_before_destroy = true }
  # The second generation's replacement fails after it was created: the apply stops with the
  # old instances of both resources deposed (not yet destroyed) and the new "slow" tainted.
  provisioner "local-exec" {
    command = var.generation == "1" ? "true" : "exit 1"
  }
}
`,
  );
  terraform(deposed, init);
  terraform(deposed, apply);
  terraform(deposed, [...apply, '-var', 'generation=2'], {}, true);
  made.set('deposed.tfstate', readFileSync(join(deposed, 'terraform.tfstate')));

  const sh = await startServer();
  const network = rootModule(
    'producer-network',
    `terraform {
  backend "s3" {${s3Config(sh.url, 'platform/network/terraform.tfstate')}
    use_lockfile   = true
  }
}
output "vpc_id" { value = "vpc-0abc" }
output "private_subnets" { value = ["subnet-1", "subnet-2"] }
output "db_password" {
  value     = "not-a-real-secret"
  sensitive = true
}
`,
  );
  terraform(network, init, sh.awsEnv);
  terraform(network, apply, sh.awsEnv);
  made.set('producer-network.tfstate', await sh.state('platform/network'));

  const dnsAddress = `${sh.url}/v1/backend/platform/dns`;
  const dns = rootModule(
    'producer-dns',
    `terraform {
  backend "http" {
    address        = "${dnsAddress}"
    lock_address   = "${dnsAddress}"
    unlock_address = "${dnsAddress}"
    username       = "terraform"
  }
}
output "zone_id" { value = "Z123" }
`,
  );
  terraform(dns, init, { TF_HTTP_PASSWORD: sh.apiToken });
  terraform(dns, apply, { TF_HTTP_PASSWORD: sh.apiToken });
  made.set('producer-dns.tfstate', await sh.state('platform/dns'));

  const consumer = rootModule(
    'consumer',
    `variable "dns_password" {}
data "terraform_remote_state" "network" {
  backend = "s3"
  config = {${s3Config(sh.url, 'platform/network/terraform.tfstate')}
  }
}
data "terraform_remote_state" "dns" {
  backend = "http"
  config = {
    address  = "${dnsAddress}"
    username = "terraform"
    password = var.dns_password
  }
}
resource "terraform_data" "cluster" {
  input = {
    vpc     = data.terraform_remote_state.network.outputs.vpc_id
    subnets = data.terraform_remote_state.network.outputs.private_subnets
    zone    = data.terraform_remote_state.dns.outputs.zone_id
  }
}
output "cluster_vpc" { value = terraform_data.cluster.output.vpc }
`,
  );
  const consumerEnv = { ...sh.awsEnv, TF_VAR_dns_password: sh.apiToken };
  terraform(consumer, init, consumerEnv);
  terraform(consumer, apply, consumerEnv);
  let consumerState = readFileSync(join(consumer, 'terraform.tfstate'), 'utf8');
  // The hand edits: a fixed address in place of the throwaway server's port, and a password
  // that is not a real token.
  consumerState = consumerState
    .split(sh.url)
    .join(PUBLISHED_BASE)
    .split(JSON.stringify(sh.apiToken))
    .join(JSON.stringify(PUBLISHED_PASSWORD));
  if (consumerState.includes(sh.apiToken)) fail('the API token is still in consumer.tfstate');
  made.set('consumer.tfstate', Buffer.from(consumerState, 'utf8'));
  await stopServer();

  mkdirSync(outDir, { recursive: true });
  const rel = relative(process.cwd(), outDir) || '.';
  process.stdout.write(`Terraform ${tfVersion} → ${rel}/\n`);
  for (const [name, body] of made) {
    const target = join(outDir, name);
    const before = existsSync(target) ? readFileSync(target) : undefined;
    writeFileSync(target, body);
    const what = before === undefined ? 'new' : before.equals(body) ? 'unchanged' : 'rewritten';
    process.stdout.write(`  ${name.padEnd(38)} ${what}\n`);
  }
  const handmade = join(outDir, HANDMADE);
  if (!existsSync(handmade) && existsSync(join(CURRENT, HANDMADE))) {
    copyFileSync(join(CURRENT, HANDMADE), handmade);
  }
  process.stdout.write(
    `  ${HANDMADE.padEnd(38)} NOT MADE: OpenTofu's encrypted envelope needs the tofu binary, ` +
      `which is not here; ${existsSync(handmade) ? 'the hand-built one is kept' : 'none in place'}\n`,
  );
  if (outDir !== CURRENT) {
    process.stdout.write(
      `The tests read ${relative(root, CURRENT)}: point FIXTURES in test/support/paths.ts at ` +
        `${relative(root, outDir)} to use these.\n`,
    );
  }
}

try {
  await main();
} catch (e) {
  process.stderr.write(`fixtures: ${e instanceof FixtureError ? e.message : e.stack}\n`);
  process.exitCode = 1;
} finally {
  await stopServer();
  rmSync(work, { recursive: true, force: true });
}
