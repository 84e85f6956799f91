/**
 * The server-wide bound on state bytes under inspection: writes that fit go in, the others
 * wait first come first served in a bounded queue for a bounded time, and beyond that are
 * refused with `slow_down` (503 / S3 SlowDown); bytes of unknown-length bodies are taken as
 * they arrive, never waited for.
 */
import { DomainError } from '../../src/common/errors';
import { ByteBudget } from '../../src/state/inspection-budget';

const code = async (p: Promise<unknown>): Promise<string> => {
  try {
    await p;
    return 'granted';
  } catch (e) {
    return e instanceof DomainError ? e.code : String(e);
  }
};

describe('inspection budget', () => {
  it('admits what fits at once; the next waits and goes in, in order, as room is given back', async () => {
    const b = new ByteBudget(100, 8);
    const first = await b.acquire(60);
    const order: string[] = [];
    const second = b.acquire(50).then((l) => (order.push('second'), l));
    const third = b.acquire(10).then((l) => (order.push('third'), l)); // fits, but is behind
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual([]);
    expect(b.inUse).toBe(60);
    first.release();
    first.release(); // a second release gives nothing back twice
    await Promise.all([second, third]);
    expect(order).toEqual(['second', 'third']);
    expect(b.inUse).toBe(60);
  });

  it('refuses with slow_down when the queue is full, and after waiting too long', async () => {
    const b = new ByteBudget(100, 1, 50);
    const held = await b.acquire(100);
    const waiting = code(b.acquire(1));
    expect(await code(b.acquire(1))).toBe('slow_down'); // queue full
    expect(await waiting).toBe('slow_down'); // timed out
    held.release();
    expect(b.inUse).toBe(0);
    expect(await code(new ByteBudget(10, 0).acquire(0))).toBe('granted');
  });

  it('a body of unknown length takes bytes as they come, and is refused (not parked) when none are free', async () => {
    const b = new ByteBudget(100, 8);
    const other = await b.acquire(70);
    const lease = await b.acquire(0);
    lease.use(20);
    expect(b.inUse).toBe(90);
    expect(() => lease.use(20)).toThrow(expect.objectContaining({ code: 'slow_down' }));
    other.release();
    lease.use(20);
    expect(b.inUse).toBe(40);
    lease.release();
    expect(b.inUse).toBe(0);
  });

  it('a declared length is reserved up front and its bytes count against it, not again', async () => {
    const b = new ByteBudget(100, 8);
    const lease = await b.acquire(80);
    lease.use(50);
    lease.use(30);
    expect(b.inUse).toBe(80);
    const rest = await b.acquire(20); // the other 20 bytes are still free
    expect(b.inUse).toBe(100);
    rest.release();
    lease.release();
  });
});
