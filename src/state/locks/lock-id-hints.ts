import type { StateAddress } from '../state-types';

/** How many (state, principal) pairs the hints remember; the oldest is forgotten first. */
export const MAX_LOCK_ID_HINTS = 4096;

/**
 * The lock ID this process last saw a principal hold on a state (its own acquire, won or
 * repeated), so that the S3 door's DeleteObject of the lock object — which names no lock ID —
 * can try the one-statement release of exactly that lock first. Only a hint: the release
 * statement deletes nothing unless that very lock is still held by that principal, and then the
 * caller goes the way it would have gone without it (read the holder, release it). Bounded,
 * insertion-ordered: the oldest entry goes first. Holds no secret (lock IDs are in the audit log).
 */
export class LockIdHints {
  private readonly ids = new Map<string, string>();

  constructor(private readonly max = MAX_LOCK_ID_HINTS) {}

  private static key(addr: StateAddress, subject: string): string {
    return `${addr.unit}\u0000${addr.workspace}\u0000${subject}`;
  }

  held(addr: StateAddress, subject: string, lockId: string): void {
    const key = LockIdHints.key(addr, subject);
    this.ids.delete(key); // re-inserted as the newest
    this.ids.set(key, lockId);
    if (this.ids.size > this.max) this.ids.delete(this.ids.keys().next().value as string);
  }

  get(addr: StateAddress, subject: string): string | undefined {
    return this.ids.get(LockIdHints.key(addr, subject));
  }

  forget(addr: StateAddress, subject: string): void {
    this.ids.delete(LockIdHints.key(addr, subject));
  }

  get size(): number {
    return this.ids.size;
  }
}
