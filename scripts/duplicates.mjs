#!/usr/bin/env node
// Copy-paste check over src/ and test/ with the pinned jscpd (package.json devDependencies,
// exact version) at a fixed --min-tokens. Clones are counted per pair of files; a pair may appear
// only if scripts/duplicates.allow.json lists it, with at most that many clones. The allow-list
// may only shrink: a listed pair with fewer clones than listed fails too (lower its count or
// remove it), so the list stays exact.
//
// jscpd 4.x (pure JavaScript) rather than 5.x: 5.x installs a native binary per platform as
// optional dependencies, and a lock file missing any of them makes `npm ci` fail.
//
//   node scripts/duplicates.mjs           check (exit 1 on a new or grown pair, or a stale entry)
//   node scripts/duplicates.mjs --report  counts and every clone
//   node scripts/duplicates.mjs --write   rewrite the allow-list from today's clones (review it!)
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const MIN_TOKENS = 50;
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const allowFile = path.join(root, 'scripts', 'duplicates.allow.json');
const bin = path.join(root, 'node_modules', '.bin', 'jscpd');

function scan() {
  const out = mkdtempSync(path.join(tmpdir(), 'statehouse-jscpd-'));
  try {
    execFileSync(
      bin,
      [
        '--min-tokens',
        String(MIN_TOKENS),
        '--format',
        'typescript,javascript',
        '--reporters',
        'json',
        '--output',
        out,
        '--silent',
        '--absolute',
        'src',
        'test',
        'scripts',
      ],
      { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] },
    );
    return JSON.parse(readFileSync(path.join(out, 'jscpd-report.json'), 'utf8'));
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

const rel = (f) => path.relative(root, f);
const report = scan();
const clones = report.duplicates.map((d) => {
  const a = `${rel(d.firstFile.name)}:${d.firstFile.start}-${d.firstFile.end}`;
  const b = `${rel(d.secondFile.name)}:${d.secondFile.start}-${d.secondFile.end}`;
  return {
    pair: [rel(d.firstFile.name), rel(d.secondFile.name)].sort().join(' <-> '),
    where: `${a}  ${b}`,
    lines: d.lines,
  };
});
const counts = new Map();
for (const c of clones) counts.set(c.pair, (counts.get(c.pair) ?? 0) + 1);
const pairs = [...counts.keys()].sort();

const args = new Set(process.argv.slice(2));
if (args.has('--report')) {
  console.log(`jscpd ${MIN_TOKENS} tokens: ${clones.length} clones in ${pairs.length} file pairs`);
  for (const c of clones.sort((x, y) => x.pair.localeCompare(y.pair)))
    console.log(`${c.lines} lines  ${c.where}`);
  process.exit(0);
}
if (args.has('--write')) {
  const previous = JSON.parse(readFileSync(allowFile, 'utf8'));
  const why = Object.fromEntries(previous.pairs.map((p) => [p.pair, p.why]));
  const next = pairs.map((pair) => ({
    pair,
    clones: counts.get(pair),
    why: why[pair] ?? 'pending',
  }));
  writeFileSync(allowFile, `${JSON.stringify({ ...previous, pairs: next }, null, 2)}\n`);
  console.log(`wrote ${next.length} pairs`);
  process.exit(0);
}

const allowed = new Map(
  JSON.parse(readFileSync(allowFile, 'utf8')).pairs.map((p) => [p.pair, p.clones]),
);
const problems = [];
for (const pair of pairs) {
  const n = counts.get(pair);
  if (!allowed.has(pair))
    problems.push(
      `new duplicate: ${pair} (${n})\n    ${clones
        .filter((c) => c.pair === pair)
        .map((c) => c.where)
        .join('\n    ')}`,
    );
  else if (n > allowed.get(pair))
    problems.push(`more duplicates than allowed: ${pair}: ${n} > ${allowed.get(pair)}`);
  else if (n < allowed.get(pair))
    problems.push(
      `fewer duplicates than listed (good): set ${pair} to ${n} in scripts/duplicates.allow.json`,
    );
}
for (const pair of allowed.keys()) {
  if (!counts.has(pair))
    problems.push(
      `listed pair has no duplicate any more (good): remove ${pair} from scripts/duplicates.allow.json`,
    );
}
if (problems.length > 0) {
  console.error(problems.join('\n'));
  process.exit(1);
}
console.log(
  `duplicates: ${clones.length} clones in ${pairs.length} file pairs, all allow-listed (jscpd ${MIN_TOKENS} tokens)`,
);
