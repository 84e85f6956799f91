import type { Principal } from '../common/principal';
import type { SecurityEventInput } from './audit.service';
import type { SecurityEvent } from './security-event';

/** What an audited change concerns, beyond who did it and what kind of event it is. */
export type ChangeFields = Pick<
  SecurityEvent,
  'action' | 'unit' | 'workspace' | 'door' | 'details'
> & { outcome?: SecurityEvent['outcome'] };

/**
 * The audit event of something a principal did to a unit or the graph (a write, a read, a lock,
 * a refused force-unlock, a declared edge, …): the one place that says how such events are
 * built, so the state, lock and graph services record the same shape. `outcome` defaults to
 * `success`.
 */
export function changeEvent(
  principal: Pick<Principal, 'subject'> | string,
  type: SecurityEvent['type'],
  fields: ChangeFields = {},
): SecurityEventInput {
  const { outcome = 'success', ...rest } = fields;
  return {
    type,
    actor: typeof principal === 'string' ? principal : principal.subject,
    outcome,
    ...rest,
  };
}
