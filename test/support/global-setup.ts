import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { ARTIFACTS, CLI, pgliteTemplateDir } from './paths';

/**
 * Once per Jest run: compile the server (the e2e suites run the real CLI in child processes)
 * and, for the embedded database, prepare a migrated PGlite data dir that tests copy instead
 * of running initdb each time.
 */
export default function globalSetup(): void {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { buildIfStale } = require('../../scripts/build-if-stale') as {
    buildIfStale: () => boolean;
  };
  buildIfStale();
  if (process.env.DATABASE_URL) return;
  const template = pgliteTemplateDir();
  if (existsSync(template)) return;
  mkdirSync(ARTIFACTS, { recursive: true });
  const tmp = mkdtempSync(join(ARTIFACTS, 'pglite-building-'));
  execFileSync(process.execPath, [CLI, 'migrate'], {
    env: { ...process.env, STATEHOUSE_DATA_DIR: tmp, STATEHOUSE_LOG_LEVEL: 'silent' },
    stdio: 'ignore',
  });
  rmSync(join(tmp, 'run'), { recursive: true, force: true });
  try {
    renameSync(tmp, template);
  } catch {
    rmSync(tmp, { recursive: true, force: true }); // another run made it first
  }
}
