import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * loadConfig's readers declare the variables they read, and the list of known variables (what
 * is not on it warns as unknown) is made from those declarations. A reader that reads a name it
 * did not declare throws at run time — on the branch that reads it, which a test may never take.
 * This reads the source instead: every variable a reader reads by name is in its declaration.
 */
const SOURCE = readFileSync(join(__dirname, '../../src/config/config.ts'), 'utf8');

interface ReaderSource {
  name: string;
  declared: string[];
  reads: string[];
}

function readersOf(source: string): ReaderSource[] {
  const starts = [...source.matchAll(/^const (\w+Reader) = reader\(/gm)];
  return starts.map((m, i) => {
    const end = i + 1 < starts.length ? starts[i + 1].index : source.length;
    const text = source.slice(m.index, end);
    const list = /reader\(\s*\[([^\]]*)\]/.exec(text)?.[1] ?? '';
    const declared = [...list.matchAll(/'([A-Z0-9_]+)'/g)].map((d) => d[1]);
    const reads = [
      ...text.matchAll(/\br\.(?!problem\b|warn\b|warning\b)\w+\(\s*'([A-Z][A-Z0-9_]*)'/g),
    ].map((r) => r[1]);
    return { name: m[1], declared, reads };
  });
}

describe('config readers declare what they read', () => {
  const readers = readersOf(SOURCE);

  it('finds the readers and what each reads (the scan itself works)', () => {
    expect(readers.length).toBeGreaterThanOrEqual(10);
    const server = readers.find((r) => r.name === 'serverReader');
    expect(server?.declared).toEqual(expect.arrayContaining(['PORT', 'STATEHOUSE_HOST']));
    expect(server?.reads).toEqual(expect.arrayContaining(['PORT', 'STATEHOUSE_DATA_DIR']));
    const fake = readersOf(
      "const fakeReader = reader(\n  ['A_B'],\n  (r) => r.str('A_B') ?? r.int('C_D', 1),\n);\n",
    );
    expect(fake).toEqual([{ name: 'fakeReader', declared: ['A_B'], reads: ['A_B', 'C_D'] }]);
  });

  it('every variable a reader reads by name is in its declaration', () => {
    const undeclared = readers.flatMap((r) =>
      r.reads.filter((n) => !r.declared.includes(n)).map((n) => `${r.name} reads ${n}`),
    );
    expect(undeclared).toEqual([]);
  });
});
