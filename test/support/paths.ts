import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

export const ROOT = resolve(__dirname, '../..');
export const ARTIFACTS = join(ROOT, '.test-artifacts');
export const CLI = join(ROOT, 'dist', 'src', 'cli', 'main.js');
/** State files written by the real terraform (`npm run fixtures`; see the README there). */
export const FIXTURES = join(ROOT, 'test', 'fixtures', 'terraform-1.11');

/** A PGlite data dir with every migration applied, keyed by the migrations' content. */
export function pgliteTemplateDir(): string {
  const h = createHash('sha256');
  for (const f of readdirSync(join(ROOT, 'migrations')).sort()) {
    h.update(f).update(readFileSync(join(ROOT, 'migrations', f)));
  }
  h.update(readFileSync(join(ROOT, 'node_modules/@electric-sql/pglite/package.json')));
  return join(ARTIFACTS, `pglite-template-${h.digest('hex').slice(0, 16)}`);
}

export const TEST_TOKEN = 'test-bootstrap-token-0123456789abcdef-xyz';
