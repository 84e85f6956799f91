import { JoinedReads } from '../../src/common/joined-reads';

/** A read whose answer the test gives when it likes, counting how often it was started. */
function controlledRead<T>() {
  const started: ((v: T) => void)[] = [];
  const failures: ((e: Error) => void)[] = [];
  const run = jest.fn(
    () =>
      new Promise<T>((resolve, reject) => {
        started.push(resolve);
        failures.push(reject);
      }),
  );
  return { run, started, failures };
}

const nextTurn = () => new Promise((r) => setImmediate(r));

describe('JoinedReads (callers arriving together share a read not yet sent)', () => {
  it('callers of one key in the same turn share one read and its answer', async () => {
    const reads = new JoinedReads<{ v: number } | undefined>();
    const { run, started } = controlledRead<{ v: number } | undefined>();
    const answers = Promise.all([1, 2, 3].map(() => reads.read('a', run)));
    await nextTurn();
    expect(run).toHaveBeenCalledTimes(1);
    started[0]({ v: 7 });
    const [x, y, z] = await answers;
    expect(x).toEqual({ v: 7 });
    expect(y).toBe(x);
    expect(z).toBe(x);
    expect(Object.isFrozen(x)).toBe(true);
    expect([reads.sent, reads.joined]).toEqual([1, 2]);
  });

  it('never joins a read already sent: a caller arriving after it went out starts its own', async () => {
    const reads = new JoinedReads<{ v: number }>();
    const { run, started } = controlledRead<{ v: number }>();
    const first = reads.read('a', run);
    await nextTurn();
    expect(run).toHaveBeenCalledTimes(1);
    // The first read is out (its answer may predate a change that completed since): a later
    // caller must not be given it.
    const second = reads.read('a', run);
    await nextTurn();
    expect(run).toHaveBeenCalledTimes(2);
    started[1]({ v: 2 });
    started[0]({ v: 1 });
    expect(await second).toEqual({ v: 2 });
    expect(await first).toEqual({ v: 1 });
  });

  it('keeps keys apart', async () => {
    const reads = new JoinedReads<{ k: string }>();
    const seen: string[] = [];
    const [a, b] = await Promise.all(
      ['a', 'b'].map((k) =>
        reads.read(k, () => {
          seen.push(k);
          return Promise.resolve({ k });
        }),
      ),
    );
    expect([a.k, b.k, seen.sort()]).toEqual(['a', 'b', ['a', 'b']]);
  });

  it('a failed read fails every caller that shared it, and the next caller reads again', async () => {
    const reads = new JoinedReads<{ v: number }>();
    const { run, failures, started } = controlledRead<{ v: number }>();
    const shared = [reads.read('a', run), reads.read('a', run)];
    await nextTurn();
    failures[0](new Error('connection lost'));
    for (const p of shared) await expect(p).rejects.toThrow('connection lost');
    const again = reads.read('a', run);
    await nextTurn();
    started[1]({ v: 3 });
    expect(await again).toEqual({ v: 3 });
    expect(run).toHaveBeenCalledTimes(2);
  });

  it('a read that throws instead of rejecting fails its callers, not the process', async () => {
    const reads = new JoinedReads<{ v: number }>();
    const boom = () => {
      throw new Error('thrown, not rejected');
    };
    await expect(Promise.all([reads.read('a', boom), reads.read('a', boom)])).rejects.toThrow(
      'thrown, not rejected',
    );
  });

  it('an absent answer is shared as absent', async () => {
    const reads = new JoinedReads<{ v: number } | undefined>();
    const got = await Promise.all([
      reads.read('a', () => Promise.resolve(undefined)),
      reads.read('a', () => Promise.resolve({ v: 1 })),
    ]);
    expect(got).toEqual([undefined, undefined]);
  });
});
