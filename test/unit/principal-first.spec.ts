/**
 * The calling principal is the first parameter of every method that takes one (after the
 * transaction's EntityManager, for methods that run inside a transaction), so a call reads
 * "who, then what" everywhere. Controllers are exempt: their parameters are what their
 * decorators bind.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

const SRC = path.resolve(__dirname, '../../src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(full);
    return e.name.endsWith('.ts') && !e.name.endsWith('.controller.ts') ? [full] : [];
  });
}

/** Methods whose Principal parameter is not first (nor second after `m: EntityManager`). */
export function misplacedPrincipals(file: string, text: string): string[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isMethodDeclaration(node)) {
      const types = node.parameters.map((p) => p.type?.getText(sf));
      const at = types.indexOf('Principal');
      const expected = types[0] === 'EntityManager' ? 1 : 0;
      if (at >= 0 && at !== expected) {
        const line = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1;
        found.push(`${path.relative(SRC, file)}:${line} ${node.name.getText(sf)}`);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return found;
}

describe('the principal comes first', () => {
  it('in every service method of src/ that takes one', () => {
    const misplaced = sourceFiles(SRC).flatMap((f) =>
      misplacedPrincipals(f, readFileSync(f, 'utf8')),
    );
    expect(misplaced).toEqual([]);
  });

  it('is caught when it is not', () => {
    const sample = `class A {
      ok(principal: Principal, name: string) {}
      inTx(m: EntityManager, principal: Principal) {}
      late(name: string, principal: Principal) {}
      lateInTx(m: EntityManager, name: string, principal: Principal) {}
    }`;
    expect(misplacedPrincipals(path.join(SRC, 'x.ts'), sample)).toEqual([
      'x.ts:4 late',
      'x.ts:5 lateInTx',
    ]);
  });
});
