import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** A compiled `WebAssembly.Module`, for PGlite's `pgliteWasmModule` option. */
export interface WasmModule {
  readonly [Symbol.toStringTag]: string;
}
/** Node's WebAssembly global (this project's TypeScript libs do not declare it). */
const wasmApi = (
  globalThis as unknown as { WebAssembly: { compile(b: Uint8Array): Promise<WasmModule> } }
).WebAssembly;

let compiling: Promise<WasmModule | undefined> | undefined;

/**
 * Starts compiling PGlite's WebAssembly (~9 MB) now, on V8's background threads, so that it is
 * done by the time the embedded database opens: `statehouse serve` calls this before it loads
 * the server's modules, which keep the main thread busy for a second or more meanwhile. Without
 * it PGlite compiles when `EmbeddedPostgres.start` opens the database, after that loading.
 */
export function precompilePglite(): void {
  if (compiling) return;
  try {
    const entry = require.resolve('@electric-sql/pglite'); // <package>/dist/index.cjs
    const wasm = readFileSync(join(dirname(entry), 'pglite.wasm'));
    // Any failure means only that PGlite compiles its own, as it would without this.
    compiling = wasmApi.compile(wasm).catch(() => undefined);
  } catch {
    compiling = Promise.resolve(undefined);
  }
}

/** The module `precompilePglite` compiled, if it was called (and worked). */
export function precompiledPglite(): Promise<WasmModule | undefined> {
  return compiling ?? Promise.resolve(undefined);
}
