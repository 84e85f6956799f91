import { Injectable } from '@nestjs/common';
import { Principal } from '../auth/principal';
import { DomainError } from '../common/errors';
import { Action, Resource } from './actions';

/** Actions that, before RBAC rules exist, only the break-glass `bootstrap-admin` may take. */
const ADMIN_ONLY: ReadonlySet<Action> = new Set<Action>([
  'unit.purge',
  'unit.force-unlock',
  'rbac.manage',
  'token.manage',
  'audit.read',
]);

/**
 * The one place that decides whether a principal may take an action on a resource; every door
 * calls it. Until RBAC rules are stored, authenticated principals may use units and only
 * `bootstrap-admin` may take the administrative actions.
 */
@Injectable()
export class AuthorizationService {
  // eslint-disable-next-line @typescript-eslint/require-await -- rules will be read from the database
  async can(principal: Principal, action: Action, _resource: Resource): Promise<boolean> {
    if (principal.kind === 'bootstrap') return true;
    return !ADMIN_ONLY.has(action);
  }

  /** Throws `forbidden` naming the action and resource when the answer is no. */
  async authorize(principal: Principal, action: Action, resource: Resource): Promise<void> {
    if (!(await this.can(principal, action, resource))) {
      const where =
        resource.workspace !== undefined && resource.unit !== '*'
          ? `${resource.unit} (workspace ${resource.workspace})`
          : resource.unit;
      throw new DomainError('forbidden', `${principal.subject} may not ${action} on ${where}`);
    }
  }
}
