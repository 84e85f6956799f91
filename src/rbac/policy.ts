import { Action } from './actions';

/**
 * The decision rules, as pure functions: explicit deny beats any allow, and no matching allow
 * is a deny. Resources are unit names matched by glob patterns — `*` within one segment, `**`
 * across segments, every other character literal — compiled to segment matchers, never to a
 * regular expression built from user input (no regex injection, no catastrophic backtracking).
 * An action on a whole unit (`UNIT_WIDE_OPERATIONS`) is decided by `decideUnitWide`: it needs an
 * allow for the unit itself and no deny in any of the unit's workspaces.
 */
export type Effect = 'allow' | 'deny';

export interface Rule {
  id: string;
  effect: Effect;
  actions: readonly Action[];
  /** Glob patterns over unit names, or `*` for server-wide actions. */
  resources: readonly string[];
  /** When set, the rule only applies to these workspaces (globs within one segment). */
  workspaces?: readonly string[] | null;
  /** Where the rule comes from (permission and role names), for explanations. */
  source?: string;
}

export interface Decision {
  allowed: boolean;
  /** The rule that decided (the deny that won, or the allow that granted); none: no rule matched. */
  rule?: Rule;
}

const MAX_PATTERN_LENGTH = 512;

/** Why a glob pattern is not acceptable, or undefined. */
export function globProblem(pattern: string): string | undefined {
  if (pattern.length === 0) return 'pattern is empty';
  if (pattern.length > MAX_PATTERN_LENGTH)
    return `pattern is longer than ${MAX_PATTERN_LENGTH} characters`;
  for (const segment of pattern.split('/')) {
    if (segment === '') return 'pattern has an empty segment';
    if (segment.includes('**') && segment !== '**') return '"**" must be a whole segment';
  }
  return undefined;
}

type SegmentMatcher = { kind: 'any-depth' } | { kind: 'segment'; parts: string[] };

export interface CompiledGlob {
  pattern: string;
  matches(name: string): boolean;
}

/** Compiles a glob; `*` alone matches the server-wide resource `*` as well as any one segment. */
export function compileGlob(pattern: string): CompiledGlob {
  const problem = globProblem(pattern);
  if (problem) throw new Error(`invalid pattern ${JSON.stringify(pattern)}: ${problem}`);
  const segments: SegmentMatcher[] = pattern
    .split('/')
    .map((s) => (s === '**' ? { kind: 'any-depth' } : { kind: 'segment', parts: s.split('*') }));
  return { pattern, matches: (name) => matchSegments(segments, 0, name.split('/'), 0) };
}

function matchSegments(
  pattern: SegmentMatcher[],
  pi0: number,
  name: string[],
  ni0: number,
): boolean {
  // Dynamic programming over (pattern position, name position): O(pattern × depth), whatever
  // the number of `**` — a pattern cannot make a decision slow.
  const failed = new Set<number>();
  const width = name.length + 1;
  const go = (pi: number, ni: number): boolean => {
    for (;;) {
      if (pi === pattern.length) return ni === name.length;
      const p = pattern[pi];
      if (p.kind === 'any-depth') {
        if (failed.has(pi * width + ni)) return false;
        if (pi === pattern.length - 1) return ni < name.length; // `**` last: one or more segments
        for (let k = ni + 1; k <= name.length; k++) if (go(pi + 1, k)) return true;
        failed.add(pi * width + ni);
        return false;
      }
      if (ni >= name.length || !matchSegment(p.parts, name[ni])) return false;
      pi++;
      ni++;
    }
  };
  return go(pi0, ni0);
}

/** `parts` is the segment split at `*`: literal pieces that must appear in order. */
export function matchSegment(parts: readonly string[], value: string): boolean {
  if (parts.length === 1) return parts[0] === value;
  const first = parts[0];
  const last = parts[parts.length - 1];
  if (
    !value.startsWith(first) ||
    value.length < first.length + last.length ||
    !value.endsWith(last)
  ) {
    return false;
  }
  let pos = first.length;
  const end = value.length - last.length;
  for (let i = 1; i < parts.length - 1; i++) {
    const at = value.indexOf(parts[i], pos);
    if (at < 0 || at + parts[i].length > end) return false;
    pos = at + parts[i].length;
  }
  return true;
}

export interface CompiledRule extends Rule {
  resourceGlobs: CompiledGlob[];
  workspaceGlobs: string[][] | undefined;
}

export function compileRule(rule: Rule): CompiledRule {
  return {
    ...rule,
    resourceGlobs: rule.resources.map(compileGlob),
    workspaceGlobs:
      rule.workspaces && rule.workspaces.length > 0
        ? rule.workspaces.map((w) => w.split('*'))
        : undefined,
  };
}

function applies(
  rule: CompiledRule,
  action: Action,
  unit: string,
  workspace: string | undefined,
): boolean {
  if (!rule.actions.includes(action)) return false;
  if (!rule.resourceGlobs.some((g) => g.matches(unit))) return false;
  if (rule.workspaceGlobs === undefined) return true;
  // A workspace-restricted rule applies only to a request that names a workspace it lists.
  return (
    workspace !== undefined && rule.workspaceGlobs.some((parts) => matchSegment(parts, workspace))
  );
}

/** Explicit deny beats any allow; no matching allow → deny. */
export function decide(
  rules: readonly CompiledRule[],
  action: Action,
  resource: { unit: string; workspace?: string },
): Decision {
  let allow: CompiledRule | undefined;
  for (const rule of rules) {
    if (!applies(rule, action, resource.unit, resource.workspace)) continue;
    if (rule.effect === 'deny') return { allowed: false, rule };
    allow ??= rule;
  }
  return allow ? { allowed: true, rule: allow } : { allowed: false };
}

/**
 * Actions on a whole unit: deleting, undeleting or purging it with every workspace at once
 * (the workspace-scoped forms decide like any other action, with `decide`).
 */
export const UNIT_WIDE_OPERATIONS = {
  'delete a unit': 'unit.delete',
  'undelete a unit': 'unit.delete',
  'purge a unit': 'unit.purge',
} as const satisfies Record<string, Action>;

export interface UnitWideDecision extends Decision {
  /** When a deny in one workspace refused it: that workspace. */
  workspace?: string;
}

/**
 * A unit-wide action acts on each of the unit's workspaces, so it needs an allow for the unit
 * itself — a rule limited to some workspaces grants no unit-wide action, even one that lists
 * them all — and no deny matching the unit in any of its workspaces, soft-deleted ones
 * included (an undelete brings them back, a purge destroys them). `workspaces` is every
 * workspace the unit has, read while the unit row is locked so that none can appear meanwhile.
 * An admin stopped by a workspace's deny removes that deny, or acts workspace by workspace.
 */
export function decideUnitWide(
  rules: readonly CompiledRule[],
  action: Action,
  unit: string,
  workspaces: readonly string[],
): UnitWideDecision {
  const whole = decide(rules, action, { unit });
  if (!whole.allowed) return whole;
  for (const workspace of workspaces) {
    // The unit's allow applies in every workspace: only a deny can refuse here.
    const d = decide(rules, action, { unit, workspace });
    if (!d.allowed) return { ...d, workspace };
  }
  return whole;
}
