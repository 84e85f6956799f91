// What the small bench scripts share: the compiled server (built first when stale) and their
// `--name=number` options.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = join(dirname(fileURLToPath(import.meta.url)), '..');
export const require = createRequire(import.meta.url);
require('./build-if-stale.js').buildIfStale();

/** A module of the compiled server, by its path under dist/src. */
export const dist = (path) => require(join(root, 'dist/src', path));

/** The number given as `--name=N` on the command line, or `fallback`. */
export function numberArg(name, fallback) {
  const given = process.argv.slice(2).find((a) => a.startsWith(`--${name}=`));
  return Number(given?.split('=')[1] ?? fallback);
}
