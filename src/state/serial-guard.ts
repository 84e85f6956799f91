/** What the guard needs to know about the current version and the incoming body. */
export interface GuardedState {
  encrypted: boolean;
  serial: number | null;
  lineage: string | null;
  sha256: string;
}

export type GuardDecision =
  | { kind: 'accept'; lineageChanged: boolean }
  | { kind: 'identical' }
  | { kind: 'reject'; reason: string };

/**
 * Terraform's own safety rules, applied on the server against the *current* version so two
 * writers that started from the same state cannot silently overwrite each other:
 * - byte-identical writes create no version;
 * - within one lineage, a lower serial, or the same serial with other bytes, is a lost update;
 * - a new lineage is accepted (and recorded);
 * - client-side-encrypted states cannot be inspected and are accepted as they come.
 */
export function guardWrite(current: GuardedState | null, incoming: GuardedState): GuardDecision {
  if (current === null) return { kind: 'accept', lineageChanged: false };
  if (current.sha256 === incoming.sha256) return { kind: 'identical' };
  if (
    current.encrypted ||
    incoming.encrypted ||
    current.serial === null ||
    incoming.serial === null
  ) {
    return { kind: 'accept', lineageChanged: false };
  }
  if (current.lineage !== incoming.lineage) return { kind: 'accept', lineageChanged: true };
  if (incoming.serial < current.serial) {
    return {
      kind: 'reject',
      reason: `serial ${incoming.serial} is older than the current serial ${current.serial} of lineage ${current.lineage}`,
    };
  }
  if (incoming.serial === current.serial) {
    return {
      kind: 'reject',
      reason: `serial ${incoming.serial} is already stored with different content (lineage ${current.lineage})`,
    };
  }
  return { kind: 'accept', lineageChanged: false };
}
