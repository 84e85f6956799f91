import { DomainError } from './errors';

export const MAX_UNIT_NAME_LENGTH = 256;
export const MAX_WORKSPACE_LENGTH = 128;
/** Role and permission names (RBAC). */
export const MAX_RBAC_NAME_LENGTH = 64;
export const DEFAULT_WORKSPACE = 'default';
const SEGMENT = /^[A-Za-z0-9._-]+$/;

/**
 * Returns why `name` is not a valid unit name, or undefined when it is. Unit names are
 * case-sensitive paths of `[A-Za-z0-9._-]` segments joined by `/`, with no empty, `.` or `..`
 * segment, at most 256 characters, and a last segment other than `terraform.tfstate` (that
 * spelling is the S3 door's key for the unit before it).
 */
export function unitNameProblem(name: string): string | undefined {
  if (name.length === 0) return 'unit name is empty';
  if (name.length > MAX_UNIT_NAME_LENGTH) {
    return `unit name is longer than ${MAX_UNIT_NAME_LENGTH} characters`;
  }
  const segments = name.split('/');
  for (const s of segments) {
    if (s === '') return 'unit name has an empty segment (leading, trailing or double "/")';
    if (s === '.' || s === '..') return 'unit name has a "." or ".." segment';
    if (!SEGMENT.test(s)) {
      return 'unit name segments may only contain letters, digits, ".", "_" and "-"';
    }
  }
  if (segments[segments.length - 1] === 'terraform.tfstate') {
    return 'unit name may not end in "terraform.tfstate" (the S3 key of the unit before it)';
  }
  return undefined;
}

export function assertUnitName(name: string): string {
  const problem = unitNameProblem(name);
  if (problem) throw new DomainError('invalid_name', problem);
  return name;
}

export function workspaceProblem(ws: string): string | undefined {
  if (ws.length === 0) return 'workspace name is empty';
  if (ws.length > MAX_WORKSPACE_LENGTH) {
    return `workspace name is longer than ${MAX_WORKSPACE_LENGTH} characters`;
  }
  if (ws === '.' || ws === '..') return 'workspace name may not be "." or ".."';
  if (!SEGMENT.test(ws)) {
    return 'workspace names may only contain letters, digits, ".", "_" and "-"';
  }
  return undefined;
}

export function assertWorkspace(ws: string | undefined): string {
  if (ws === undefined) return DEFAULT_WORKSPACE;
  const problem = workspaceProblem(ws);
  if (problem) throw new DomainError('invalid_name', problem);
  return ws;
}

/**
 * Reads a unit name from the raw (still percent-encoded) rest of a URL path, segment by
 * segment, so an encoded `/` or a `..` hidden as `%2E%2E` cannot change which unit is meant.
 * Express decodes wildcard parameters before we see them; this never trusts that decoding.
 */
export function unitNameFromRawPath(rawRest: string): string {
  const path = rawRest.split('?')[0];
  if (path === '') throw new DomainError('invalid_name', 'unit name is empty');
  const segments = path.split('/').map((raw) => {
    let s: string;
    try {
      s = decodeURIComponent(raw);
    } catch {
      throw new DomainError('invalid_name', 'unit name has a malformed percent-encoding');
    }
    if (s.includes('/')) {
      throw new DomainError('invalid_name', 'unit name segments may not contain an encoded "/"');
    }
    return s;
  });
  return assertUnitName(segments.join('/'));
}
