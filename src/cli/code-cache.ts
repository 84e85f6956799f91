import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import * as nodeModule from 'node:module';
import { dirname, join } from 'node:path';
import { Script } from 'node:vm';

/**
 * V8's code cache for the CommonJS modules a process loads, on a Node without its own compile
 * cache (Node 20; `module.enableCompileCache` exists from 22.1 and is used there instead, see
 * compile-cache.ts). Compiling is about a third of loading the server's modules; with the code
 * V8 made last time (including the functions that ran, not only each file's top level) a start
 * skips most of it.
 *
 * One file per Node and V8 version (`node20-<version>-<arch>.bin` in the cache directory, beside
 * the compiled code like Node's own cache), read once at the start. Each entry is named by the
 * module's path and the sha1 of its source: a changed file misses, whatever its length or mtime,
 * and V8 refuses code of another version or other flags itself (then the module compiles as it
 * would without this). A module whose source has an `import(` is compiled by Node as always
 * (a `vm.Script` would need its own dynamic-import hook). What was compiled anew is written when
 * the process exits, to a temporary file renamed into place: a crash leaves the old file, a
 * damaged file only misses. The file is bounded (`MAX_CACHE_BYTES`).
 */

/** The most the cache file holds; past it, only the modules of the last process are kept. */
export const MAX_CACHE_BYTES = 96 * 1024 * 1024;

type Entry = { hash: string; data: Buffer };

interface ModuleInternals {
  prototype: {
    _compile: (this: CompiledModule, content: string, filename: string, format?: string) => unknown;
  };
  _resolveLookupPaths(request: string, parent: unknown): string[] | null;
  wrap(source: string): string;
  _resolveFilename(request: string, parent: unknown, isMain: boolean, options?: unknown): string;
  _extensions: unknown;
  _cache: unknown;
}

interface CompiledModule {
  exports: unknown;
  require(id: string): unknown;
}

/** What one process did with the cache: counts, for tests and the start's debug line. */
export interface CodeCacheStats {
  /** Modules whose code came from the cache. */
  hits: number;
  /** Modules compiled here (no entry, another source, or V8 refused the entry). */
  misses: number;
  /** Modules Node compiled itself (an `import(` in the source). */
  passed: number;
}

let active: CodeCache | undefined;
/** The process's main module, as Node's own `require.main` gives it. */
const MAIN_MODULE = require.main;

export class CodeCache {
  readonly stats: CodeCacheStats = { hits: 0, misses: 0, passed: 0 };
  private readonly entries = new Map<string, Entry>();
  /** Scripts compiled anew here: their code is taken at exit (with what ran by then). */
  private readonly fresh = new Map<string, { hash: string; script: Script }>();

  constructor(readonly file: string) {
    this.entries = readCacheFile(file);
  }

  /** The compiled function of a module's source (Node's wrapper around it). */
  compile(filename: string, content: string, wrapped: string): Script {
    const hash = createHash('sha1').update(content).digest('base64');
    const cached = this.entries.get(filename);
    const useCache = cached !== undefined && cached.hash === hash;
    const script = new Script(wrapped, {
      filename,
      ...(useCache ? { cachedData: cached.data } : {}),
    });
    if (useCache && !script.cachedDataRejected) {
      this.stats.hits++;
    } else {
      this.stats.misses++;
      this.fresh.set(filename, { hash, script });
    }
    return script;
  }

  /** Writes the cache file when anything was compiled anew; never throws. */
  save(): boolean {
    if (this.fresh.size === 0) return false;
    try {
      const next = new Map<string, Entry>();
      for (const [filename, { hash, script }] of this.fresh) {
        next.set(filename, { hash, data: script.createCachedData() });
      }
      let size = [...next.values()].reduce((n, e) => n + e.data.length, 0);
      for (const [filename, entry] of this.entries) {
        if (next.has(filename) || size + entry.data.length > MAX_CACHE_BYTES) continue;
        next.set(filename, entry);
        size += entry.data.length;
      }
      writeCacheFile(this.file, next);
      this.fresh.clear();
      return true;
    } catch {
      return false;
    }
  }
}

/**
 * Compiles every CommonJS module loaded from now on through a `CodeCache` in `cacheDir`, on a
 * Node without `module.enableCompileCache`; false (and nothing changed) elsewhere, when
 * NODE_DISABLE_COMPILE_CACHE or NODE_COMPILE_CACHE is set, or when it is already on.
 */
export function enableCodeCache(
  cacheDir: string,
  env: NodeJS.ProcessEnv = process.env,
  api: { enableCompileCache?: unknown } = nodeModule as { enableCompileCache?: unknown },
): CodeCache | undefined {
  if (active || typeof api.enableCompileCache === 'function') return undefined;
  if (env.NODE_COMPILE_CACHE !== undefined || env.NODE_DISABLE_COMPILE_CACHE !== undefined) {
    return undefined;
  }
  const Module = nodeModule.Module as unknown as ModuleInternals;
  const cache = new CodeCache(
    join(cacheDir, `node20-${process.versions.node}-${process.versions.v8}-${process.arch}.bin`),
  );
  const nodeCompile = Module.prototype._compile;
  Module.prototype._compile = function (
    this: CompiledModule,
    content: string,
    filename: string,
    format?: string,
  ) {
    // ES modules (Node's `require(esm)`) and sources with a dynamic import: Node's own way.
    if ((format !== undefined && format !== 'commonjs') || content.includes('import(')) {
      cache.stats.passed++;
      return nodeCompile.call(this, content, filename, format);
    }
    const source = content.startsWith('#!') ? '//' + content.slice(2) : content;
    let fn: (...args: unknown[]) => unknown;
    try {
      fn = cache
        .compile(filename, content, Module.wrap(source))
        .runInThisContext({ displayErrors: true }) as typeof fn;
    } catch {
      // Not CommonJS after all (ES syntax Node may detect): Node decides, and reports.
      cache.stats.passed++;
      return nodeCompile.call(this, content, filename, format);
    }
    return run(this, fn, filename);
  };
  const run = (module: CompiledModule, fn: (...args: unknown[]) => unknown, filename: string) => {
    const resolve = (request: string, options?: unknown) =>
      Module._resolveFilename(request, module, false, options);
    const require = Object.assign((id: string) => module.require(id), {
      resolve: Object.assign(resolve, {
        paths: (request: string) => Module._resolveLookupPaths(request, module),
      }),
      main: MAIN_MODULE,
      extensions: Module._extensions,
      cache: Module._cache,
    });
    return fn.call(module.exports, module.exports, require, module, filename, dirname(filename));
  };
  process.once('exit', () => cache.save());
  active = cache;
  return cache;
}

/** The cache this process uses, if any. */
export function activeCodeCache(): CodeCache | undefined {
  return active;
}

// The file: a 4-byte length, a JSON index [[filename, hash, length], ...], then the data.

function readCacheFile(file: string): Map<string, Entry> {
  const entries = new Map<string, Entry>();
  try {
    const bytes = readFileSync(file);
    const indexLength = bytes.readUInt32LE(0);
    const index = JSON.parse(bytes.subarray(4, 4 + indexLength).toString('utf8')) as [
      string,
      string,
      number,
    ][];
    let at = 4 + indexLength;
    for (const [filename, hash, length] of index) {
      if (at + length > bytes.length) break;
      entries.set(filename, { hash, data: bytes.subarray(at, at + length) });
      at += length;
    }
  } catch {
    entries.clear(); // none yet, or unreadable: everything compiles as without a cache
  }
  return entries;
}

function writeCacheFile(file: string, entries: Map<string, Entry>): void {
  const index = JSON.stringify([...entries].map(([f, e]) => [f, e.hash, e.data.length]));
  const head = Buffer.alloc(4);
  head.writeUInt32LE(Buffer.byteLength(index));
  mkdirSync(dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    writeFileSync(
      tmp,
      Buffer.concat([head, Buffer.from(index), ...[...entries.values()].map((e) => e.data)]),
      {
        mode: 0o644,
      },
    );
    renameSync(tmp, file);
  } finally {
    rmSync(tmp, { force: true });
  }
}
