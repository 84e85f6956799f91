#!/usr/bin/env node
import { enableCodeCache } from './code-cache';
import { COMPILE_CACHE_DIR, enableCompileCache } from './compile-cache';
import { answerCredsFromCache } from './creds-fast-path';

/**
 * The `statehouse` bin. AWS tooling runs `creds --json` as its credential_process before many
 * of its calls, so that one is answered from the credentials cache when it can be, before
 * anything else is loaded (no commander, Nest, TypeORM or command module): then Node's own
 * start is nearly all it costs. Everything else, and `creds` with nothing reusable cached, runs
 * the full CLI in `program.ts`. On Node ≥ 22.1 every module loaded after the first line is kept
 * compiled on disk (`enableCompileCache`); on Node 20, which has no such cache, V8's code for
 * the modules loaded after the fast path is kept there instead (`enableCodeCache`), so that the
 * fast path reads no cache file.
 */
export async function main(args: string[]): Promise<void> {
  // Before anything big is loaded: what loads after this is compiled once, then kept.
  enableCompileCache();
  if (answerCredsFromCache(args)) return;
  enableCodeCache(COMPILE_CACHE_DIR);
  const program = await import('./program');
  await program.main(args);
}

if (require.main === module) void main(process.argv.slice(2));
