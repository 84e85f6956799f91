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

/**
 * The caller's settings `cleanEnv` can leave out. The CA overrides: SSL_CERT_FILE, SSL_CERT_DIR
 * and NODE_EXTRA_CA_CERTS.
 */
export type CallerSetting = 'TF_*' | 'AWS_*' | 'STATEHOUSE_*' | 'DATABASE_URL' | 'CA overrides';

const CA_OVERRIDES = ['SSL_CERT_FILE', 'SSL_CERT_DIR', 'NODE_EXTRA_CA_CERTS'];

/**
 * The caller's environment without the settings in `drop` (by default all of them: TF_*, AWS_*,
 * STATEHOUSE_* settings, DATABASE_URL and CA overrides).
 */
export function cleanEnv(
  drop: readonly CallerSetting[] = [
    'TF_*',
    'AWS_*',
    'STATEHOUSE_*',
    'DATABASE_URL',
    'CA overrides',
  ],
): Record<string, string> {
  const dropped = (k: string): boolean =>
    (drop.includes('TF_*') && k.startsWith('TF_')) ||
    (drop.includes('AWS_*') && k.startsWith('AWS_')) ||
    (drop.includes('STATEHOUSE_*') && k.startsWith('STATEHOUSE_')) ||
    (drop.includes('DATABASE_URL') && k === 'DATABASE_URL') ||
    (drop.includes('CA overrides') && CA_OVERRIDES.includes(k));
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined || dropped(k)) continue;
    env[k] = v;
  }
  return env;
}

/**
 * Runs a terraform command (as `runTerraform`) and fails with its whole output unless it exits 0;
 * `showCwd` names the working directory in that message.
 */
export async function runTerraformOk(
  cwd: string,
  args: string[],
  env: Record<string, string>,
  options: { timeoutMs?: number; showCwd?: boolean } = {},
): Promise<TfResult> {
  const r = await runTerraform(cwd, args, env, options.timeoutMs);
  if (r.code !== 0) {
    const where = options.showCwd ? ` (in ${cwd})` : '';
    throw new Error(`terraform ${args.join(' ')}${where} exited ${r.code}:\n${r.output}`);
  }
  return r;
}

/**
 * The versions of one page of GET /v1/units/<unit>/versions, oldest first; the page must be the
 * whole list (no next page).
 */
export function wholeVersionList<T extends { version: number }>(page: {
  items: T[];
  nextCursor: string | null;
}): T[] {
  expect(page.nextCursor).toBeNull();
  return [...page.items].sort((a, b) => a.version - b.version);
}
