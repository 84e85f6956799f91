import { DomainError } from '../common/errors';
import type { StateAddress } from './state-types';

export function unitNotFound(name: string): DomainError {
  return new DomainError('unit_not_found', `unit ${name} does not exist`);
}

export function stateNotFound(unit: string, workspace: string): DomainError {
  return new DomainError('state_not_found', `${unit} (workspace ${workspace}) has no state`);
}

export function versionNotFound(addr: StateAddress, n: number): DomainError {
  return new DomainError(
    'version_not_found',
    `${addr.unit} (workspace ${addr.workspace}) has no version ${n}`,
  );
}
