import { MaxLength } from 'class-validator';
import { MAX_RBAC_NAME_LENGTH, MAX_UNIT_NAME_LENGTH, MAX_WORKSPACE_LENGTH } from './names';

/**
 * Length limits of request fields that hold names, taken from `names.ts` (the one place that
 * says how long a name may be), so that a DTO never refuses a name the server accepts
 * elsewhere, nor lets through one it refuses. The full check stays with the services
 * (`assertUnitName`, `assertWorkspace`); these only bound the input early.
 */

/** A unit name, a unit-name prefix or a unit pattern. */
export const UnitNameLength = (): PropertyDecorator =>
  MaxLength(MAX_UNIT_NAME_LENGTH, {
    message: `$property is longer than ${MAX_UNIT_NAME_LENGTH} characters (the longest unit name)`,
  });

/** A workspace name. */
export const WorkspaceLength = (): PropertyDecorator =>
  MaxLength(MAX_WORKSPACE_LENGTH, {
    message: `$property is longer than ${MAX_WORKSPACE_LENGTH} characters (the longest workspace name)`,
  });

/** The name of a role or a permission. */
export const RbacNameLength = (): PropertyDecorator =>
  MaxLength(MAX_RBAC_NAME_LENGTH, {
    message: `$property is longer than ${MAX_RBAC_NAME_LENGTH} characters (the longest role or permission name)`,
  });
