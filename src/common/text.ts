/**
 * Text PostgreSQL cannot hold. `text` columns refuse the NUL character, `jsonb` refuses the
 * `\u0000` escape, and both refuse UTF-16 surrogates that are not part of a pair (a JavaScript
 * string can hold one; UTF-8 cannot encode it). Pure functions: the request pipe refuses such
 * strings at the door, the audit log escapes them, the graph escapes the names it builds.
 */

export type TextProblem = 'a NUL character' | 'an unpaired UTF-16 surrogate';

/** What in `s` PostgreSQL cannot store, or undefined when it can store all of it. */
export function textProblem(s: string): TextProblem | undefined {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0) return 'a NUL character';
    if (c >= 0xd800 && c <= 0xdfff) {
      const next = i + 1 < s.length ? s.charCodeAt(i + 1) : 0;
      if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) i++;
      else return 'an unpaired UTF-16 surrogate';
    }
  }
  return undefined;
}

/**
 * `s` with each NUL and each unpaired surrogate written as its JSON escape (`\u0000`,
 * `\ud800`) in plain text, so it can be stored and still shows what was there.
 */
export function escapeUnstorable(s: string): string {
  if (textProblem(s) === undefined) return s;
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const next = i + 1 < s.length ? s.charCodeAt(i + 1) : 0;
    if (c >= 0xd800 && c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
      out += s[i] + s[i + 1];
      i++;
    } else if (c === 0 || (c >= 0xd800 && c <= 0xdfff)) {
      out += `\\u${c.toString(16).padStart(4, '0')}`;
    } else {
      out += s[i];
    }
  }
  return out;
}

/**
 * At most `max` UTF-16 units of `s` (never half a surrogate pair), with `…` when cut. For
 * values that are recorded but not needed whole (audit details).
 */
export function capText(s: string, max: number): string {
  if (s.length <= max) return s;
  let cut = max - 1;
  const last = s.charCodeAt(cut - 1);
  if (last >= 0xd800 && last <= 0xdbff) cut--;
  return `${s.slice(0, cut)}…`;
}

/** Where a JSON document holds text PostgreSQL cannot store, or is nested too deeply. */
export interface JsonTextFinding {
  /** `description`, `rules[0].resources[2]`, or `` for the document itself. */
  path: string;
  problem: TextProblem | 'nesting';
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$-]*$/;

function childPath(parent: string, key: string | number): string {
  if (typeof key === 'number') return `${parent}[${key}]`;
  // JSON.stringify writes NUL and unpaired surrogates as escapes: the path itself is storable.
  const name = IDENTIFIER.test(key) ? key : JSON.stringify(key);
  if (parent === '') return name;
  return IDENTIFIER.test(key) ? `${parent}.${name}` : `${parent}[${name}]`;
}

/**
 * The first string (value or member name) of a parsed JSON document that PostgreSQL cannot
 * store, or the first value nested deeper than `maxDepth`. Walks without recursion, so a
 * hostile document cannot exhaust the stack.
 */
export function findUnstorableText(
  value: unknown,
  maxDepth: number,
  rootPath = '',
): JsonTextFinding | undefined {
  const stack: { value: unknown; path: string; depth: number }[] = [
    { value, path: rootPath, depth: 0 },
  ];
  while (stack.length > 0) {
    const { value: v, path, depth } = stack.pop() as (typeof stack)[number];
    if (typeof v === 'string') {
      const problem = textProblem(v);
      if (problem) return { path, problem };
      continue;
    }
    if (typeof v !== 'object' || v === null) continue;
    if (depth >= maxDepth) return { path, problem: 'nesting' };
    const children: { value: unknown; path: string; depth: number }[] = [];
    if (Array.isArray(v)) {
      v.forEach((item, i) =>
        children.push({ value: item, path: childPath(path, i), depth: depth + 1 }),
      );
    } else {
      for (const key of Object.keys(v)) {
        const problem = textProblem(key);
        const at = childPath(path, key);
        if (problem) return { path: at, problem };
        children.push({ value: (v as Record<string, unknown>)[key], path: at, depth: depth + 1 });
      }
    }
    // Reversed, so the document is searched in its own order.
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]);
  }
  return undefined;
}
