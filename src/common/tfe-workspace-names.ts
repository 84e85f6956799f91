/**
 * The unit a TFE workspace is (pure): organization `acme` with workspace `network` is the unit
 * `acme/network`. Here, below every module, because both the TFE door and the dependency graph
 * (a `terraform_remote_state` through `backend "remote"`) name units this way.
 */
import { DomainError } from './errors';
import { unitNameProblem } from './names';

const NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]*$/;
export const MAX_ORGANIZATION_LENGTH = 64;
export const MAX_WORKSPACE_NAME_LENGTH = 90;

function nameProblem(kind: string, name: string, max: number): string | undefined {
  if (name.length === 0) return `${kind} name is empty`;
  if (name.length > max) return `${kind} name is longer than ${max} characters`;
  if (!NAME.test(name) || name === '.' || name === '..') {
    return `${kind} name may only contain letters, digits, "-", "_" and "." (not first)`;
  }
  return undefined;
}

export function assertOrganization(name: string): string {
  const problem = nameProblem('organization', name, MAX_ORGANIZATION_LENGTH);
  if (problem)
    throw new DomainError('invalid_name', `${JSON.stringify(name.slice(0, 100))}: ${problem}`);
  return name;
}

/** The unit a workspace of an organization is; `invalid_name` (422) for names it cannot be. */
export function unitOfWorkspace(organization: string, workspace: string): string {
  assertOrganization(organization);
  const problem =
    nameProblem('workspace', workspace, MAX_WORKSPACE_NAME_LENGTH) ??
    unitNameProblem(`${organization}/${workspace}`);
  if (problem) {
    throw new DomainError('invalid_name', `${JSON.stringify(workspace.slice(0, 100))}: ${problem}`);
  }
  return `${organization}/${workspace}`;
}
