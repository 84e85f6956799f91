import type { RbacRule } from './api-types';
import { UsageError } from './errors';

// The rule syntax of `statehouse rbac … --rule`, and its display form.
//
// A rule on the command line (`--rule`, repeatable) is one string of three or four words:
//
//     EFFECT ACTIONS RESOURCES [ws=WORKSPACES]
//
//   EFFECT      allow | deny
//   ACTIONS     comma-separated actions: unit.read,unit.write
//   RESOURCES   comma-separated globs over unit names (`*` within a segment, `**` across
//               segments), or `*` for the server-wide actions rbac.manage, token.manage,
//               audit.read
//   ws=…        optional: only in these workspaces (comma-separated, `*` allowed);
//               `workspaces=` is the same
//
//   --rule 'allow unit.read,unit.write team-a/**'
//   --rule 'allow unit.write */prod ws=prod'
//   --rule 'deny unit.delete,unit.purge **'
//
// Quote the rule (it has spaces, and the shell would expand the globs). `permission show`
// prints rules in the same syntax.
//
// Parsing is a split on whitespace and on commas plus one anchored regular expression on the
// fourth word: linear in the length of the rule, whatever it holds. Every refusal is a
// UsageError (exit code 2) that quotes the rule.

export const RULE_SYNTAX =
  'EFFECT ACTIONS RESOURCES [ws=WORKSPACES], e.g. "allow unit.read,unit.write team-a/**"';

function list(raw: string, what: string, rule: string): string[] {
  const items = raw.split(',');
  if (items.some((i) => i === '')) {
    throw new UsageError(`--rule "${rule}": ${what} is a comma-separated list without empty items`);
  }
  return items;
}

/** Parses one `--rule` (see the syntax above). */
export function parseRule(rule: string): RbacRule {
  const words = rule.trim().split(/\s+/).filter(Boolean);
  if (words.length < 3 || words.length > 4) {
    throw new UsageError(`--rule "${rule}": expected ${RULE_SYNTAX}`);
  }
  const [effect, actions, resources, ws] = words;
  if (effect !== 'allow' && effect !== 'deny') {
    throw new UsageError(`--rule "${rule}": the effect is allow or deny, not ${effect}`);
  }
  if (actions.includes('=') || resources.includes('=')) {
    throw new UsageError(`--rule "${rule}": expected ${RULE_SYNTAX}`);
  }
  const parsed: RbacRule = {
    effect,
    actions: list(actions, 'ACTIONS', rule),
    resources: list(resources, 'RESOURCES', rule),
  };
  if (ws !== undefined) {
    const m = /^(?:ws|workspaces)=(.*)$/.exec(ws);
    if (!m) {
      throw new UsageError(
        `--rule "${rule}": the fourth word restricts workspaces, ws=WORKSPACES (e.g. ws=prod,dev), not ${ws}`,
      );
    }
    parsed.workspaces = list(m[1], 'ws=', rule);
  }
  return parsed;
}

/** A rule in `--rule` syntax, for display (and to copy into a command). */
export function formatRule(r: RbacRule): string {
  const ws = r.workspaces && r.workspaces.length > 0 ? ` ws=${r.workspaces.join(',')}` : '';
  return `${r.effect} ${r.actions.join(',')} ${r.resources.join(',')}${ws}`;
}
