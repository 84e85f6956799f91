import { spawn } from 'node:child_process';
import { onPath } from './processes';

/** The `terraform` executable on the PATH (1.11.x), or undefined. */
export const TERRAFORM = onPath('terraform');

export const TERRAFORM_MISSING =
  `terraform is not on the PATH (PATH=${process.env.PATH ?? ''}): the terraform suite needs ` +
  'the real terraform binary (1.11.x) and does not skip without it — install terraform or ' +
  'put it on the PATH';

export interface TfResult {
  code: number | null;
  stdout: string;
  stderr: string;
  /** stdout and stderr together, as they came, for messages. */
  output: string;
  ms: number;
}

/** Runs a terraform command; never throws for a non-zero exit. */
export function runTerraform(
  cwd: string,
  args: string[],
  env: Record<string, string>,
  timeoutMs = 90_000,
): Promise<TfResult> {
  if (TERRAFORM === undefined) throw new Error(TERRAFORM_MISSING);
  const started = Date.now();
  const proc = spawn(TERRAFORM, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  let output = '';
  proc.stdout.on('data', (d: Buffer) => {
    stdout += d.toString();
    output += d.toString();
  });
  proc.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
    output += d.toString();
  });
  const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
  return new Promise((resolve, reject) => {
    proc.once('error', reject);
    proc.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, output, ms: Date.now() - started });
    });
  });
}

/** The caller's environment without TF_*, AWS_*, STATEHOUSE_* settings, DATABASE_URL and CA overrides. */
export function cleanEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined || k === 'DATABASE_URL') continue;
    if (k.startsWith('TF_') || k.startsWith('AWS_') || k.startsWith('STATEHOUSE_')) continue;
    if (k === 'SSL_CERT_FILE' || k === 'SSL_CERT_DIR' || k === 'NODE_EXTRA_CA_CERTS') continue;
    env[k] = v;
  }
  return env;
}
