import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Module } from 'node:module';
import { CodeCache, enableCodeCache } from '../../src/cli/code-cache';
import { ROOT } from '../support/paths';

const wrap = (source: string) => (Module as unknown as { wrap(s: string): string }).wrap(source);

describe("V8's code cache on a Node without a compile cache (Node 20)", () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'code-cache-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('compiles a module once: the next process takes its code from the file', () => {
    const file = join(dir, 'cache.bin');
    const source = 'exports.f = function (x) { return x * 2; };';
    const first = new CodeCache(file);
    first.compile('/m.js', source, wrap(source)).runInThisContext();
    expect(first.stats).toEqual({ hits: 0, misses: 1, passed: 0 });
    expect(first.save()).toBe(true);
    expect(first.save()).toBe(false); // nothing new since

    const second = new CodeCache(file);
    second.compile('/m.js', source, wrap(source));
    expect(second.stats).toEqual({ hits: 1, misses: 0, passed: 0 });
    expect(second.save()).toBe(false);
  });

  it('misses when the source changed (same length too), and when the file is damaged', () => {
    const file = join(dir, 'cache.bin');
    const a = 'exports.v = 1;';
    const b = 'exports.v = 2;';
    const first = new CodeCache(file);
    first.compile('/m.js', a, wrap(a));
    first.save();
    const changed = new CodeCache(file);
    changed.compile('/m.js', b, wrap(b));
    expect(changed.stats.misses).toBe(1);

    writeFileSync(file, Buffer.from('\xff\xff\xff\x7fgarbage'));
    const damaged = new CodeCache(file);
    damaged.compile('/m.js', a, wrap(a));
    expect(damaged.stats.misses).toBe(1);
  });

  it('is not turned on where Node has its own cache, or when Node is told not to cache', () => {
    expect(enableCodeCache(dir, {}, { enableCompileCache: () => undefined })).toBeUndefined();
    expect(enableCodeCache(dir, { NODE_DISABLE_COMPILE_CACHE: '1' }, {})).toBeUndefined();
    expect(enableCodeCache(dir, { NODE_COMPILE_CACHE: dir }, {})).toBeUndefined();
    expect(readdirSync(dir)).toEqual([]);
  });

  it('loads modules as Node does (require, resolve, main, __filename, errors), hit on the second run', () => {
    // A real process: the compiled code cache module, then two modules of a small tree.
    const cacheDir = join(dir, 'cache');
    writeFileSync(
      join(dir, 'a.js'),
      [
        "const b = require('./b');",
        'exports.result = {',
        '  b: b.value,',
        "  resolved: require.resolve('./b') === __dirname + '/b.js',",
        "  paths: Array.isArray(require.resolve.paths('x')),",
        '  main: require.main === process.mainModule,',
        "  file: __filename.endsWith('a.js'),",
        '  cached: require.cache[__filename] === module,',
        '  self: this === module.exports,',
        '};',
      ].join('\n'),
    );
    writeFileSync(join(dir, 'b.js'), '#!/usr/bin/env node\nexports.value = 42;\n');
    writeFileSync(join(dir, 'c.js'), 'module.exports = () => import("./b.js");\n');
    writeFileSync(join(dir, 'bad.js'), 'const x = ;\n');
    const script = [
      `const { enableCodeCache } = require(${JSON.stringify(join(ROOT, 'dist/src/cli/code-cache.js'))});`,
      `const cache = enableCodeCache(${JSON.stringify(cacheDir)}, {}, {});`,
      `const a = require(${JSON.stringify(join(dir, 'a.js'))});`,
      `require(${JSON.stringify(join(dir, 'c.js'))});`,
      'let syntax = false;',
      `try { require(${JSON.stringify(join(dir, 'bad.js'))}); } catch (e) { syntax = e instanceof SyntaxError; }`,
      'console.log(JSON.stringify({ result: a.result, stats: cache.stats, syntax }));',
    ].join('\n');
    const run = () =>
      JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' })) as {
        result: Record<string, unknown>;
        stats: { hits: number; misses: number; passed: number };
        syntax: boolean;
      };
    const first = run();
    expect(first.result).toEqual({
      b: 42,
      resolved: true,
      paths: true,
      main: true,
      file: true,
      cached: true,
      self: true,
    });
    expect(first.syntax).toBe(true);
    // c.js has a dynamic import: Node compiles it; bad.js goes to Node, which reports it.
    expect(first.stats).toEqual({ hits: 0, misses: 2, passed: 2 });
    const second = run();
    expect(second.result).toEqual(first.result);
    expect(second.stats).toEqual({ hits: 2, misses: 0, passed: 2 });
  });
});
