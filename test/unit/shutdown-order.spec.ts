/**
 * The order of a stop's last step (`app.close()`): Nest calls every provider's
 * `beforeApplicationShutdown` before any `onApplicationShutdown`, whatever the modules' order
 * (global modules, the database's among them, come first within each hook). So the database
 * closes last exactly when its handle is the only provider with an `onApplicationShutdown`, and
 * everything that still needs it — the audit queue being stored, timers that query, listeners —
 * stops in `beforeApplicationShutdown`.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { ROOT } from '../support/paths';

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? sources(join(dir, e.name))
      : e.name.endsWith('.ts')
        ? [join(dir, e.name)]
        : [],
  );
}

describe('the stop closes the database last', () => {
  it('only the database handle implements onApplicationShutdown; the rest stop before it', () => {
    const implementing = sources(join(ROOT, 'src'))
      .filter((f) => /\bonApplicationShutdown\s*\(/.test(readFileSync(f, 'utf8')))
      .map((f) => relative(ROOT, f));
    expect(implementing).toEqual(['src/database/database.module.ts']);
    const audit = readFileSync(join(ROOT, 'src/audit/audit.service.ts'), 'utf8');
    expect(audit).toMatch(/async beforeApplicationShutdown\(\): Promise<void> \{/);
  });
});
