import type { AuditDoor } from '../common/door';

/**
 * The one shape of a security-relevant event. Today they are written to the log (`audit` key);
 * the audit log stores the same objects. Never put secrets or state content in `details`.
 */
export type SecurityEventType =
  | 'auth.bootstrap_token_used'
  | 'auth.bootstrap_token_generated'
  | 'auth.bootstrap_token_disabled'
  | 'auth.failed'
  | 'auth.login'
  | 'auth.refresh_reuse'
  | 'auth.api_token_created'
  | 'auth.api_token_revoked'
  | 'auth.s3_credentials_issued'
  | 'lock.force_unlock'
  | 'state.restore'
  | 'state.delete'
  | 'state.undelete'
  | 'state.purge'
  | 'unit.delete'
  | 'unit.undelete'
  | 'unit.purge'
  | 'unit.update'
  | 'project.create'
  | 'authz.denied'
  | 'rbac.init'
  | 'rbac.change'
  | 'state.read'
  | 'state.write'
  | 'lock.acquire'
  | 'lock.release'
  | 'graph.edge_declared'
  | 'graph.edge_deleted';

export interface SecurityEvent {
  type: SecurityEventType;
  /** Who did it (principal subject), or `anonymous`. */
  actor: string;
  outcome: 'success' | 'denied' | 'failure';
  /** The RBAC action concerned, when there is one. */
  action?: string;
  unit?: string;
  workspace?: string;
  /** Which door the request came through. */
  door?: AuditDoor;
  details?: Record<string, string | number | boolean | null>;
  requestId?: string;
  clientIp?: string;
  at: string;
}
