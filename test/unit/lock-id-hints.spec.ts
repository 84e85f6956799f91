import { LockIdHints } from '../../src/state/locks/lock-id-hints';

describe('LockIdHints', () => {
  const addr = (i: number) => ({ unit: `u-${i}`, workspace: 'default' });

  it('remembers the last lock ID per state and principal, and forgets it', () => {
    const h = new LockIdHints(8);
    h.held(addr(1), 'user:a', 'L1');
    h.held(addr(1), 'user:b', 'B1');
    h.held(addr(1), 'user:a', 'L2');
    expect(h.get(addr(1), 'user:a')).toBe('L2');
    expect(h.get(addr(1), 'user:b')).toBe('B1');
    expect(h.get({ unit: 'u-1', workspace: 'dev' }, 'user:a')).toBeUndefined();
    h.forget(addr(1), 'user:a');
    expect(h.get(addr(1), 'user:a')).toBeUndefined();
  });

  it('is bounded: beyond its size the oldest entry goes first', () => {
    const h = new LockIdHints(3);
    for (let i = 0; i < 10; i++) h.held(addr(i), 'user:a', `L${i}`);
    expect(h.size).toBe(3);
    expect(h.get(addr(6), 'user:a')).toBeUndefined();
    expect([7, 8, 9].map((i) => h.get(addr(i), 'user:a'))).toEqual(['L7', 'L8', 'L9']);
    // Taken again, an entry is the newest.
    h.held(addr(7), 'user:a', 'L7b');
    h.held(addr(10), 'user:a', 'L10');
    expect(h.get(addr(8), 'user:a')).toBeUndefined();
    expect(h.get(addr(7), 'user:a')).toBe('L7b');
  });
});
