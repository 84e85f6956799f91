#!/usr/bin/env node
// The module graph of src/: which top-level folder (module) imports which, and whether any
// imports form a cycle between modules. Per-file cycle rules (import/no-cycle) cannot see a
// cycle that runs through several files of different modules; this can.
//
// A module is a folder directly under src/ (src/state, src/auth, …); files directly in src/
// are the composition root ("root"), which only the CLI (the entry point) may import.
//
// Two kinds of edge are counted, from the TypeScript program itself:
//   runtime — a require() in the compiled JavaScript (what Node loads, in load order);
//   type    — an import that compiles to nothing (`import type`, or names used only as types).
// Policy: neither kind may close a cycle between modules. A type-only cycle does not break
// loading, but it is the same tangle in the design; both are reported and both fail.
//
//   node scripts/module-deps.mjs            check: fail (exit 1) on a cycle not in the allow-list,
//                                           and on an allow-listed edge that no longer exists
//   node scripts/module-deps.mjs --report   print the counts and every cross-module edge
//   node scripts/module-deps.mjs --json     the same as JSON
//
// The dependency direction is one order of the modules, LAYERS below, from the entry points down
// to the pure helpers: a module imports only modules below it. An order with no upward edge has
// no cycle. The allow-list (scripts/module-deps.allow.json) holds the upward edges that remain
// today; it may only shrink — an upward edge not listed fails, and so does a listed edge that no
// longer exists (remove it from the list).
import { readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const srcDir = path.join(root, 'src');
const allowFile = path.join(root, 'scripts', 'module-deps.allow.json');

/** Top to bottom: each module may import the modules after it, never one before it. */
export const LAYERS = [
  'cli', // the command line: starts the server, calls the API
  'root', // src/*.ts: the application module, the HTTP server, the OpenAPI document
  'monitoring', // /metrics, request timing, gauges read from state and audit
  'logging', // the log: lines, format, redaction
  'health',
  'backend', // door: Terraform's HTTP backend
  's3compat', // door: the S3-compatible endpoint
  'tfe', // door: the TFE API (cloud {}, backend "remote")
  'graph', // the dependency graph (a write hook on state)
  'state', // units, workspaces, versions: the write and read paths
  'auth', // who is calling: login, tokens, STS credentials, revocation, the global guard
  'rbac', // what a principal may do: roles, rules, the authorization decision
  'audit',
  'metrics',
  'storage', // blob stores; the postgres one keeps blobs in the database
  'database',
  'config',
  'common', // pure helpers: errors, names, text, streams
];

function moduleOf(file) {
  const rel = path.relative(srcDir, file);
  if (rel.startsWith('..')) return undefined;
  const parts = rel.split(path.sep);
  return parts.length === 1 ? 'root' : parts[0];
}

function resolveSpecifier(fromFile, spec) {
  if (!spec.startsWith('.')) return undefined;
  const base = path.resolve(path.dirname(fromFile), spec);
  for (const c of [base, `${base}.ts`, path.join(base, 'index.ts')]) {
    if (c.endsWith('.ts') && existsSync(c)) return c;
  }
  return undefined;
}

export function moduleGraph() {
  const configPath = path.join(root, 'tsconfig.json');
  const parsed = ts.parseJsonConfigFileContent(
    ts.readConfigFile(configPath, ts.sys.readFile).config,
    ts.sys,
    root,
  );
  const files = parsed.fileNames.filter((f) => moduleOf(path.resolve(f)) !== undefined);
  const program = ts.createProgram(files, {
    ...parsed.options,
    noEmit: false,
    declaration: false,
    sourceMap: false,
    incremental: false,
    composite: false,
    outDir: '/nonexistent',
  });
  // file -> set of files, by kind
  const sourceImports = new Map();
  const runtimeImports = new Map();
  for (const sf of program.getSourceFiles()) {
    const file = path.resolve(sf.fileName);
    if (moduleOf(file) === undefined || sf.isDeclarationFile) continue;
    const targets = new Set();
    const visit = (node) => {
      if (
        (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
        node.moduleSpecifier &&
        ts.isStringLiteral(node.moduleSpecifier)
      ) {
        const t = resolveSpecifier(file, node.moduleSpecifier.text);
        if (t) targets.add(t);
      } else if (
        ts.isImportTypeNode(node) &&
        ts.isLiteralTypeNode(node.argument) &&
        ts.isStringLiteral(node.argument.literal)
      ) {
        const t = resolveSpecifier(file, node.argument.literal.text);
        if (t) targets.add(t);
      }
      ts.forEachChild(node, visit);
    };
    visit(sf);
    sourceImports.set(file, targets);
    runtimeImports.set(file, new Set());
  }
  // What survives compilation: the require() calls of the emitted JavaScript.
  for (const sf of program.getSourceFiles()) {
    const file = path.resolve(sf.fileName);
    if (!runtimeImports.has(file)) continue;
    program.emit(sf, (name, text) => {
      if (!name.endsWith('.js')) return;
      for (const m of text.matchAll(/require\("(\.[^"]*)"\)/g)) {
        const t = resolveSpecifier(file, m[1]);
        if (t) runtimeImports.get(file).add(t);
      }
    });
  }
  const edges = new Map(); // "a -> b" -> { runtime: n, type: n, files: [...] }
  let crossImports = { runtime: 0, type: 0 };
  for (const [file, targets] of sourceImports) {
    const from = moduleOf(file);
    for (const t of targets) {
      const to = moduleOf(t);
      if (to === undefined || to === from) continue;
      const kind = runtimeImports.get(file).has(t) ? 'runtime' : 'type';
      crossImports[kind]++;
      const key = `${from} -> ${to}`;
      const e = edges.get(key) ?? { from, to, runtime: 0, type: 0, imports: [] };
      e[kind]++;
      e.imports.push(`${path.relative(root, file)} -> ${path.relative(root, t)} (${kind})`);
      edges.set(key, e);
    }
  }
  return { edges, crossImports };
}

/** Strongly connected components (Tarjan) of the module graph with more than one module. */
function cycles(edges) {
  const adj = new Map();
  for (const e of edges.values()) {
    if (!adj.has(e.from)) adj.set(e.from, []);
    if (!adj.has(e.to)) adj.set(e.to, []);
    adj.get(e.from).push(e.to);
  }
  let index = 0;
  const idx = new Map(),
    low = new Map(),
    on = new Set(),
    stack = [],
    out = [];
  const strong = (v) => {
    idx.set(v, index);
    low.set(v, index);
    index++;
    stack.push(v);
    on.add(v);
    for (const w of adj.get(v)) {
      if (!idx.has(w)) {
        strong(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
    }
    if (low.get(v) === idx.get(v)) {
      const c = [];
      let w;
      do {
        w = stack.pop();
        on.delete(w);
        c.push(w);
      } while (w !== v);
      if (c.length > 1) out.push(c.sort());
    }
  };
  for (const v of adj.keys()) if (!idx.has(v)) strong(v);
  return out;
}

/** The edges inside a cycle: both ends in the same strongly connected component. */
function cycleEdges(edges) {
  const comps = cycles(edges);
  const compOf = new Map();
  comps.forEach((c, i) => c.forEach((m) => compOf.set(m, i)));
  return {
    comps,
    inCycle: [...edges.values()].filter(
      (e) => compOf.has(e.from) && compOf.get(e.from) === compOf.get(e.to),
    ),
  };
}

const args = new Set(process.argv.slice(2));
const { edges, crossImports } = moduleGraph();
const { comps, inCycle } = cycleEdges(edges);
const rootImported = [...edges.values()].filter((e) => e.to === 'root');

if (args.has('--json')) {
  console.log(
    JSON.stringify(
      {
        crossImports,
        edges: [...edges.values()],
        cycles: comps,
        inCycle: inCycle.map((e) => `${e.from} -> ${e.to}`),
      },
      null,
      2,
    ),
  );
  process.exit(0);
}
if (args.has('--report')) {
  console.log(
    `cross-module imports: ${crossImports.runtime + crossImports.type} (${crossImports.runtime} runtime, ${crossImports.type} type-only)`,
  );
  console.log(
    `module edges: ${edges.size}; modules in cycles: ${comps.map((c) => c.join(',')).join(' | ') || 'none'}`,
  );
  for (const e of [...edges.values()].sort((a, b) =>
    `${a.from}${a.to}`.localeCompare(`${b.from}${b.to}`),
  )) {
    const mark = inCycle.includes(e) ? '  [cycle]' : '';
    console.log(`${e.from} -> ${e.to}: ${e.runtime} runtime, ${e.type} type${mark}`);
    if (args.has('--files')) for (const i of e.imports) console.log(`    ${i}`);
  }
  process.exit(0);
}

const allowed = existsSync(allowFile) ? JSON.parse(readFileSync(allowFile, 'utf8')).edges : [];
const problems = [];
const rank = new Map(LAYERS.map((m, i) => [m, i]));
const upward = [];
for (const e of edges.values()) {
  if (!rank.has(e.from) || !rank.has(e.to)) {
    problems.push(
      `module ${rank.has(e.from) ? e.to : e.from} is not in LAYERS (scripts/module-deps.mjs): place it`,
    );
  } else if (rank.get(e.from) > rank.get(e.to)) upward.push(e);
}
for (const e of upward) {
  const key = `${e.from} -> ${e.to}`;
  if (!allowed.includes(key)) {
    problems.push(
      `upward import ${key} (against the dependency direction, so it can close a cycle):\n    ${e.imports.join('\n    ')}`,
    );
  }
}
for (const key of allowed) {
  if (!upward.some((e) => `${e.from} -> ${e.to}` === key)) {
    problems.push(`allow-listed edge is gone: remove "${key}" from scripts/module-deps.allow.json`);
  }
}
for (const e of rootImported.filter((x) => x.from !== 'cli'))
  problems.push(
    `module ${e.from} imports the composition root (src/*.ts):\n    ${e.imports.join('\n    ')}`,
  );
if (problems.length > 0) {
  console.error(problems.join('\n'));
  process.exit(1);
}
console.log(
  `module graph: ${edges.size} edges, ${crossImports.runtime + crossImports.type} cross-module imports (${crossImports.runtime} runtime), ${upward.length} upward (allow-listed, to be removed), ${inCycle.length} edges in cycles`,
);
