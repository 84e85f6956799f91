import { DomainError, HeldLock } from '../../common/errors';

/**
 * The lock authority table (README, "Lock authority (every door)") as pure decisions. `holder` is the lock row as it
 * is now (null when unlocked); `principal` the caller's subject.
 */

/** May this caller write the state? `lockId` is the ID the request names (HTTP `?ID=`, API). */
export function assertMayWrite(
  holder: HeldLock | null,
  principal: string,
  lockId: string | undefined,
  door: 'http' | 'api' | 's3' | 'tfe',
): void {
  if (holder === null) {
    if (lockId !== undefined && lockId !== '') {
      throw new DomainError(
        'lock_not_held',
        `the write names lock ${lockId}, but the state is not locked (was the lock force-unlocked?)`,
      );
    }
    return;
  }
  if (holder.principal !== principal) {
    throw new DomainError('locked', `the state is locked by ${holder.principal}`, holder);
  }
  // The S3 door cannot send an ID: the holder's principal decides there.
  if (door === 's3') return;
  if (lockId === undefined || lockId === '') {
    throw new DomainError(
      'locked',
      `the state is locked (lock ${holder.id}); name the lock ID to write while holding it`,
      holder,
    );
  }
  if (lockId !== holder.id) {
    throw new DomainError(
      'lock_mismatch',
      `the write names lock ${lockId}, but the state is locked by lock ${holder.id}`,
      holder,
    );
  }
}

/**
 * May this caller change the state's history (restore, delete) while a lock may be held? Not
 * while another principal holds it; the holder itself may, and a lock ID it names must match.
 */
export function assertNotLockedByOther(
  holder: HeldLock | null,
  principal: string,
  lockId?: string,
): void {
  if (holder === null) return;
  if (holder.principal !== principal) {
    throw new DomainError('locked', `the state is locked by ${holder.principal}`, holder);
  }
  if (lockId !== undefined && lockId !== holder.id) {
    throw new DomainError('lock_mismatch', `the state is locked by lock ${holder.id}`, holder);
  }
}
