import { join } from 'node:path';
import { COMPILE_CACHE_DIR, enableCompileCache, ModuleApi } from '../../src/cli/compile-cache';
import { ROOT } from '../support/paths';

describe("Node's compile cache for the CLI's modules", () => {
  const api = () => {
    const dirs: (string | undefined)[] = [];
    const withCache: ModuleApi = { enableCompileCache: (dir) => dirs.push(dir) };
    return { dirs, withCache };
  };

  it('is turned on where Node has it (≥ 22.1), in a directory beside the compiled code', () => {
    const { dirs, withCache } = api();
    expect(enableCompileCache(withCache, {})).toBe(true);
    expect(dirs).toEqual([COMPILE_CACHE_DIR]);
    // Run from dist/src/cli it is dist/.compile-cache; never the shared temporary directory.
    expect(COMPILE_CACHE_DIR.startsWith(ROOT)).toBe(true);
    expect(COMPILE_CACHE_DIR).toBe(join(__dirname, '..', '..', '.compile-cache'));
  });

  it('leaves it to Node when NODE_COMPILE_CACHE or NODE_DISABLE_COMPILE_CACHE is set', () => {
    for (const env of [{ NODE_COMPILE_CACHE: '/somewhere' }, { NODE_DISABLE_COMPILE_CACHE: '1' }]) {
      const { dirs, withCache } = api();
      expect(enableCompileCache(withCache, env)).toBe(false);
      expect(dirs).toEqual([]);
    }
  });

  it('is nothing on a Node without it (20), and never fails a start', () => {
    expect(enableCompileCache({}, {})).toBe(false);
    const failing: ModuleApi = {
      enableCompileCache: () => {
        throw new Error('EACCES');
      },
    };
    expect(enableCompileCache(failing, {})).toBe(false);
  });
});
