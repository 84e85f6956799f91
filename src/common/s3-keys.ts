import { DEFAULT_WORKSPACE, unitNameProblem, workspaceProblem } from './names';

/**
 * Object keys of the S3 door ↔ (unit, workspace), by one deterministic, collision-free rule:
 *
 * - the canonical key of unit U is `U` when U's last segment ends in `.tfstate`
 *   (`team/app.tfstate`), otherwise `U/terraform.tfstate` (`team/app/terraform.tfstate`);
 * - a workspace other than `default` lives under `<prefix>/<workspace>/<canonical key>` for each
 *   configured workspace key prefix (Terraform's `workspace_key_prefix`, default `env:`);
 * - `<state key>.tflock` is the lock object of that state.
 *
 * Any other spelling is refused, so two keys never reach the same state and every state has
 * exactly one key per prefix.
 */
export const STATE_FILE = 'terraform.tfstate';
export const LOCK_SUFFIX = '.tflock';

export interface StateRef {
  unit: string;
  workspace: string;
}

export type KeyResolution =
  | { kind: 'state'; ref: StateRef }
  | { kind: 'lock'; ref: StateRef }
  | { kind: 'invalid'; reason: string };

export function canonicalStateKey(unit: string): string {
  const last = unit.slice(unit.lastIndexOf('/') + 1);
  return last.endsWith('.tfstate') ? unit : `${unit}/${STATE_FILE}`;
}

/** The key of (unit, workspace) under `prefix` (the prefix is ignored for `default`). */
export function objectKey(ref: StateRef, prefix: string): string {
  const key = canonicalStateKey(ref.unit);
  return ref.workspace === DEFAULT_WORKSPACE ? key : `${prefix}/${ref.workspace}/${key}`;
}

/** The unit whose canonical key is `key`, or why there is none. */
export function unitOfStateKey(key: string): { unit: string } | { reason: string } {
  let unit: string;
  if (key.endsWith(`/${STATE_FILE}`)) {
    unit = key.slice(0, -(STATE_FILE.length + 1));
    if (unit.slice(unit.lastIndexOf('/') + 1).endsWith('.tfstate')) {
      return { reason: `the key of unit ${unit} is ${unit} itself, not ${key}` };
    }
  } else if (key === STATE_FILE) {
    return { reason: `a key needs a unit before it: use <unit>/${STATE_FILE}` };
  } else if (key.slice(key.lastIndexOf('/') + 1).endsWith('.tfstate')) {
    unit = key;
  } else {
    return { reason: `state keys end in /${STATE_FILE} or .tfstate (got ${key})` };
  }
  const problem = unitNameProblem(unit);
  return problem ? { reason: problem } : { unit };
}

/** Resolves a decoded object key against the configured workspace prefixes. */
export function resolveKey(key: string, prefixes: readonly string[]): KeyResolution {
  let rest = key;
  let kind: 'state' | 'lock' = 'state';
  if (rest.endsWith(LOCK_SUFFIX)) {
    kind = 'lock';
    rest = rest.slice(0, -LOCK_SUFFIX.length);
  }
  let workspace = DEFAULT_WORKSPACE;
  for (const prefix of prefixes) {
    if (rest.startsWith(`${prefix}/`)) {
      const after = rest.slice(prefix.length + 1);
      const slash = after.indexOf('/');
      if (slash <= 0)
        return { kind: 'invalid', reason: `key ${key} names no workspace after ${prefix}/` };
      workspace = after.slice(0, slash);
      const problem = workspaceProblem(workspace);
      if (problem) return { kind: 'invalid', reason: problem };
      if (workspace === DEFAULT_WORKSPACE) {
        return { kind: 'invalid', reason: `the default workspace has no ${prefix}/ form` };
      }
      rest = after.slice(slash + 1);
      break;
    }
  }
  const unit = unitOfStateKey(rest);
  if ('reason' in unit) return { kind: 'invalid', reason: unit.reason };
  return { kind, ref: { unit: unit.unit, workspace } };
}
