import * as nodeModule from 'node:module';
import { join } from 'node:path';

/** What this needs of `node:module` (`enableCompileCache` exists on Node ≥ 22.1 only). */
export interface ModuleApi {
  enableCompileCache?: (cacheDir?: string) => unknown;
}

/**
 * Where the compiled code is kept: `dist/.compile-cache`, beside the code it was compiled from
 * (this file compiles to `dist/src/cli`), so only who may change that code may change the cache.
 * (Node's default, a directory in the shared temporary directory, is not.)
 */
export const COMPILE_CACHE_DIR = join(__dirname, '..', '..', '.compile-cache');

/**
 * Turns on Node's on-disk cache of compiled modules (Node ≥ 22.1): a start then compiles none
 * of the code it loaded before (about a third of loading the server's modules). Node checks
 * each entry against the source it was made from. Where Node has no such cache (Node 20), or
 * the directory cannot be written, everything is compiled as before; nothing fails.
 * `NODE_COMPILE_CACHE` (a directory of one's choosing) and `NODE_DISABLE_COMPILE_CACHE` are
 * Node's own and win.
 */
export function enableCompileCache(
  api: ModuleApi = nodeModule as ModuleApi,
  env: NodeJS.ProcessEnv = process.env,
): boolean {
  if (typeof api.enableCompileCache !== 'function') return false;
  if (env.NODE_COMPILE_CACHE !== undefined || env.NODE_DISABLE_COMPILE_CACHE !== undefined) {
    return false;
  }
  try {
    api.enableCompileCache(COMPILE_CACHE_DIR);
    return true;
  } catch {
    return false;
  }
}
