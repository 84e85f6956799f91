import type { EntityManager } from 'typeorm';
import type { AuditService, SecurityEventInput } from '../audit/audit.service';
import type { StateRepository } from './state.repository';

/**
 * A change and its audit record in one transaction: both commit, or neither. `event` may be
 * computed from the change's result. The transaction may run twice (deadlock retry): `work`
 * touches nothing but the database.
 */
export function auditedChange<T>(
  repo: StateRepository,
  audit: AuditService,
  event: SecurityEventInput | ((result: T) => SecurityEventInput),
  work: (m: EntityManager) => Promise<T>,
): Promise<T> {
  return repo.transaction(async (m) => {
    const result = await work(m);
    await audit.recordIn(m, typeof event === 'function' ? event(result) : event);
    return result;
  });
}
