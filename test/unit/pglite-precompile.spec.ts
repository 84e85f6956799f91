import { precompiledPglite, precompilePglite } from '../../src/database/pglite-precompile';

describe("PGlite's WebAssembly compiled ahead of the embedded start", () => {
  it('is nothing until asked for, then the compiled module of the installed PGlite', async () => {
    await expect(precompiledPglite()).resolves.toBeUndefined();
    precompilePglite();
    const compiled = await precompiledPglite();
    expect(Object.prototype.toString.call(compiled)).toBe('[object WebAssembly.Module]');
    // The imports PGlite's own loader provides: the module is PGlite's, not any module.
    const imports = (
      globalThis as unknown as {
        WebAssembly: { Module: { imports(m: unknown): { module: string }[] } };
      }
    ).WebAssembly.Module.imports(compiled);
    expect(imports.some((i) => i.module === 'env')).toBe(true);
    expect(await precompiledPglite()).toBe(compiled); // compiled once
  });
});
