import fc from 'fast-check';
import { GuardDecision, GuardedState, guardWrite } from '../../src/state/serial-guard';

const LINEAGE = '3f2a7c1e-0000-4000-8000-000000000001';
const OTHER_LINEAGE = '3f2a7c1e-0000-4000-8000-000000000002';

function state(serial: number, sha256: string, lineage: string | null = LINEAGE): GuardedState {
  return { encrypted: false, serial, lineage, sha256 };
}

function encrypted(sha256: string): GuardedState {
  return { encrypted: true, serial: null, lineage: null, sha256 };
}

describe('guardWrite', () => {
  it('accepts the first write of a state', () => {
    expect(guardWrite(null, state(1, 'sha-a'))).toEqual({ kind: 'accept', lineageChanged: false });
  });

  it('accepts the first write even when it is encrypted', () => {
    expect(guardWrite(null, encrypted('sha-a'))).toEqual({ kind: 'accept', lineageChanged: false });
  });

  it('reports a byte-identical write as identical', () => {
    expect(guardWrite(state(7, 'sha-a'), state(7, 'sha-a'))).toEqual({ kind: 'identical' });
  });

  it('reports a byte-identical encrypted write as identical', () => {
    expect(guardWrite(encrypted('sha-e'), encrypted('sha-e'))).toEqual({ kind: 'identical' });
  });

  it('rejects a lower serial in the same lineage, naming both serials', () => {
    const decision = guardWrite(state(42, 'sha-a'), state(41, 'sha-b'));
    expect(decision.kind).toBe('reject');
    const reason = (decision as { reason: string }).reason;
    expect(reason).toContain('serial 41');
    expect(reason).toContain('current serial 42');
    expect(reason).toContain(LINEAGE);
  });

  it('rejects the same serial with different bytes in the same lineage', () => {
    const decision = guardWrite(state(42, 'sha-a'), state(42, 'sha-b'));
    expect(decision.kind).toBe('reject');
    expect((decision as { reason: string }).reason).toMatch(
      /serial 42 is already stored with different content/,
    );
  });

  it('accepts a higher serial in the same lineage without a lineage change', () => {
    expect(guardWrite(state(42, 'sha-a'), state(43, 'sha-b'))).toEqual({
      kind: 'accept',
      lineageChanged: false,
    });
    expect(guardWrite(state(42, 'sha-a'), state(1000, 'sha-b'))).toEqual({
      kind: 'accept',
      lineageChanged: false,
    });
  });

  it('accepts a new lineage whatever its serial, recording the change', () => {
    for (const serial of [0, 41, 42, 43]) {
      expect(guardWrite(state(42, 'sha-a'), state(serial, 'sha-b', OTHER_LINEAGE))).toEqual({
        kind: 'accept',
        lineageChanged: true,
      });
    }
  });

  it('accepts an encrypted write over a plain state, whatever the serials', () => {
    expect(guardWrite(state(42, 'sha-a'), encrypted('sha-b'))).toEqual({
      kind: 'accept',
      lineageChanged: false,
    });
    expect(
      guardWrite(state(42, 'sha-a'), { encrypted: true, serial: 1, lineage: LINEAGE, sha256: 'x' }),
    ).toEqual({ kind: 'accept', lineageChanged: false });
  });

  it('accepts a plain write over an encrypted state, even with a lower serial', () => {
    const current: GuardedState = { encrypted: true, serial: 42, lineage: LINEAGE, sha256: 'e' };
    expect(guardWrite(current, state(1, 'sha-b'))).toEqual({
      kind: 'accept',
      lineageChanged: false,
    });
  });

  describe('property: decisions follow the reference table', () => {
    type Cmp = 'lower' | 'same' | 'higher';
    type Expected = GuardDecision['kind'] | 'accept+lineage';

    /**
     * The serial guard's rules (README, "What Statehouse promises") written out as a table, keyed by how the
     * incoming serial compares, whether the lineage is the same and whether the bytes are.
     */
    const TABLE: Record<`${Cmp}|${'same' | 'new'}-lineage|${'same' | 'other'}-bytes`, Expected> = {
      'lower|same-lineage|same-bytes': 'identical',
      'same|same-lineage|same-bytes': 'identical',
      'higher|same-lineage|same-bytes': 'identical',
      'lower|new-lineage|same-bytes': 'identical',
      'same|new-lineage|same-bytes': 'identical',
      'higher|new-lineage|same-bytes': 'identical',
      'lower|same-lineage|other-bytes': 'reject',
      'same|same-lineage|other-bytes': 'reject',
      'higher|same-lineage|other-bytes': 'accept',
      'lower|new-lineage|other-bytes': 'accept+lineage',
      'same|new-lineage|other-bytes': 'accept+lineage',
      'higher|new-lineage|other-bytes': 'accept+lineage',
    };

    const expectedFor = (current: GuardedState, incoming: GuardedState): Expected => {
      const cmp: Cmp =
        incoming.serial! < current.serial!
          ? 'lower'
          : incoming.serial === current.serial
            ? 'same'
            : 'higher';
      const lineage = incoming.lineage === current.lineage ? 'same' : 'new';
      const bytes = incoming.sha256 === current.sha256 ? 'same' : 'other';
      return TABLE[`${cmp}|${lineage}-lineage|${bytes}-bytes`];
    };

    const kindOf = (d: GuardDecision): Expected =>
      d.kind === 'accept' && d.lineageChanged ? 'accept+lineage' : d.kind;

    // Small domains so equal serials, lineages and hashes come up often.
    const plain = fc.record({
      encrypted: fc.constant(false),
      serial: fc.integer({ min: 0, max: 4 }),
      lineage: fc.constantFrom('lineage-a', 'lineage-b'),
      sha256: fc.constantFrom('sha-1', 'sha-2', 'sha-3'),
    });

    it('for plain states', () => {
      fc.assert(
        fc.property(plain, plain, (current, incoming) => {
          expect(kindOf(guardWrite(current, incoming))).toBe(expectedFor(current, incoming));
        }),
        { numRuns: 2000 },
      );
    });

    it('for encrypted states on either side: identical bytes or accept', () => {
      const anyState = fc.record({
        encrypted: fc.boolean(),
        serial: fc.option(fc.integer({ min: 0, max: 4 }), { nil: null }),
        lineage: fc.option(fc.constantFrom('lineage-a', 'lineage-b'), { nil: null }),
        sha256: fc.constantFrom('sha-1', 'sha-2'),
      });
      fc.assert(
        fc.property(anyState, anyState, (current, incoming) => {
          fc.pre(current.encrypted || incoming.encrypted);
          const expected: Expected = current.sha256 === incoming.sha256 ? 'identical' : 'accept';
          expect(kindOf(guardWrite(current, incoming))).toBe(expected);
        }),
        { numRuns: 2000 },
      );
    });

    it('a rejection always names the incoming and the current serial', () => {
      fc.assert(
        fc.property(
          fc.integer({ min: 0, max: 1_000_000 }),
          fc.integer({ min: 0, max: 1_000_000 }),
          (currentSerial, incomingSerial) => {
            fc.pre(incomingSerial <= currentSerial);
            const d = guardWrite(state(currentSerial, 'sha-a'), state(incomingSerial, 'sha-b'));
            expect(d.kind).toBe('reject');
            const reason = (d as { reason: string }).reason;
            expect(reason).toContain(String(incomingSerial));
            expect(reason).toContain(String(currentSerial));
          },
        ),
      );
    });
  });
});
