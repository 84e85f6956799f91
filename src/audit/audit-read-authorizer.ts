import type { Principal } from '../common/principal';

/**
 * Who may read the audit log: `GET /v1/audit` asks this before it reads a row. The audit module
 * sits below rbac (rbac records audit events), so it declares the question and the rbac module,
 * which decides every request, provides the answer (`audit.read` on every unit). Not optional:
 * an application without it fails to start rather than serve the log unchecked.
 */
export interface AuditReadAuthorizer {
  /** Resolves when `principal` may read the audit log; throws the refusal (`forbidden`) if not. */
  authorizeRead(principal: Principal): Promise<void>;
}

export const AUDIT_READ_AUTHORIZER = Symbol('AUDIT_READ_AUTHORIZER');
