import { HeldLock } from '../../src/common/errors';
import { assertMayWrite, assertNotLockedByOther } from '../../src/state/locks/lock-authority';
import { lockIdFromBody, parseLockInfo } from '../../src/state/locks/lock-info';
import { thrown } from '../support/services';

const ALICE = 'user:alice';
const BOB = 'token:ci-pipeline';
const LOCK_ID = 'c1f0a8e2-5b6d-4e3f-9a7b-0d1e2f3a4b5c';

const HOLDER: HeldLock = {
  infoJson: `{"ID":"${LOCK_ID}","Operation":"OperationTypeApply","Who":"alice@laptop"}`,
  id: LOCK_ID,
  principal: ALICE,
  createdAt: new Date('2025-01-01T00:00:00Z'),
};

const body = (text: string): Buffer => Buffer.from(text, 'utf8');

describe('lock authority: writing state', () => {
  describe('while unlocked', () => {
    it.each(['http', 'api', 's3'] as const)('allows a write that names no lock (%s)', (door) => {
      expect(() => assertMayWrite(null, ALICE, undefined, door)).not.toThrow();
      expect(() => assertMayWrite(null, ALICE, '', door)).not.toThrow();
    });

    it.each(['http', 'api'] as const)(
      'refuses a write naming a lock that is no longer held with lock_not_held (%s)',
      (door) => {
        const err = thrown(() => assertMayWrite(null, ALICE, LOCK_ID, door));
        expect(err.code).toBe('lock_not_held');
        expect(err.message).toContain(LOCK_ID);
        expect(err.lock).toBeUndefined();
      },
    );
  });

  describe('by the holder', () => {
    it.each(['http', 'api'] as const)('allows the write naming the right lock ID (%s)', (door) => {
      expect(() => assertMayWrite(HOLDER, ALICE, LOCK_ID, door)).not.toThrow();
    });

    it.each(['http', 'api'] as const)(
      'refuses a write naming another lock ID with lock_mismatch and the holder lock (%s)',
      (door) => {
        const err = thrown(() => assertMayWrite(HOLDER, ALICE, 'some-other-lock', door));
        expect(err.code).toBe('lock_mismatch');
        expect(err.lock).toBe(HOLDER);
        expect(err.message).toContain('some-other-lock');
        expect(err.message).toContain(LOCK_ID);
      },
    );

    it.each([
      ['http', undefined],
      ['http', ''],
      ['api', undefined],
      ['api', ''],
    ] as const)(
      'refuses a %s write that names no lock ID (%j) with locked and the holder lock',
      (door, id) => {
        const err = thrown(() => assertMayWrite(HOLDER, ALICE, id, door));
        expect(err.code).toBe('locked');
        expect(err.lock).toBe(HOLDER);
      },
    );

    it('lets the S3 door, which cannot send an ID, decide by principal', () => {
      expect(() => assertMayWrite(HOLDER, ALICE, undefined, 's3')).not.toThrow();
    });
  });

  describe('by another principal', () => {
    it.each(['http', 'api', 's3'] as const)(
      'refuses the write with locked and the holder lock (%s)',
      (door) => {
        const err = thrown(() => assertMayWrite(HOLDER, BOB, undefined, door));
        expect(err.code).toBe('locked');
        expect(err.lock).toBe(HOLDER);
        expect(err.message).toContain(ALICE);
      },
    );

    it.each(['http', 'api', 's3'] as const)(
      'refuses the write even when it names the right lock ID (%s)',
      (door) => {
        const err = thrown(() => assertMayWrite(HOLDER, BOB, LOCK_ID, door));
        expect(err.code).toBe('locked');
        expect(err.lock).toBe(HOLDER);
      },
    );
  });
});

describe('lock authority: restore and delete', () => {
  it('allows them while unlocked', () => {
    expect(() => assertNotLockedByOther(null, BOB)).not.toThrow();
  });

  it("allows them by the holder's principal", () => {
    expect(() => assertNotLockedByOther(HOLDER, ALICE)).not.toThrow();
  });

  it('refuses them by another principal with locked and the holder lock', () => {
    const err = thrown(() => assertNotLockedByOther(HOLDER, BOB));
    expect(err.code).toBe('locked');
    expect(err.lock).toBe(HOLDER);
    expect(err.message).toContain(ALICE);
  });
});

describe('parseLockInfo', () => {
  it('keeps the LockInfo JSON byte for byte, including key order and whitespace', () => {
    const text =
      '{\n  "Who" : "alice@laptop",\t"ID": "' +
      LOCK_ID +
      '",\n  "Operation": "OperationTypePlan", "Info": "", "Version": "1.11.0",' +
      ' "Created": "2025-01-01T00:00:00.123456789Z", "Path": "team/app", "Extra": {"b":1,"a":2}, "Unicode": "héllo ✓"\n}\n';
    const parsed = parseLockInfo(body(text), false);
    expect(parsed.id).toBe(LOCK_ID);
    expect(parsed.infoJson).toBe(text);
    expect(Buffer.from(parsed.infoJson, 'utf8').equals(body(text))).toBe(true);
  });

  it('keeps the JSON as sent when asked to generate an ID but one is present', () => {
    const text = '{"Operation":"OperationTypeApply",  "ID":"given-id"}';
    expect(parseLockInfo(body(text), true)).toEqual({ id: 'given-id', infoJson: text });
  });

  it('generates an ID when asked and none is sent, keeping the other fields', () => {
    const parsed = parseLockInfo(body('{"Operation":"api","Who":"ci"}'), true);
    expect(parsed.id).toMatch(
      /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    );
    expect(JSON.parse(parsed.infoJson)).toEqual({ ID: parsed.id, Operation: 'api', Who: 'ci' });
  });

  it('generates an ID for an empty body when asked', () => {
    const parsed = parseLockInfo(body(''), true);
    expect(parsed.id).not.toBe('');
    expect(JSON.parse(parsed.infoJson)).toEqual({ ID: parsed.id });
  });

  it('generates a different ID each time', () => {
    const a = parseLockInfo(body('{}'), true).id;
    const b = parseLockInfo(body('{}'), true).id;
    expect(a).not.toBe(b);
  });

  it('does not generate an ID unless asked', () => {
    const err = thrown(() => parseLockInfo(body('{"Operation":"OperationTypeApply"}'), false));
    expect(err.code).toBe('invalid_request');
    expect(err.message).toMatch(/no "ID" string/);
  });

  it.each(['[]', '["ID"]', '"an-id"', '42', 'null', 'true'])(
    'refuses the non-object %s',
    (text) => {
      for (const generateId of [false, true]) {
        const err = thrown(() => parseLockInfo(body(text), generateId));
        expect(err.code).toBe('invalid_request');
        expect(err.message).toMatch(/must be a JSON object/);
      }
    },
  );

  it.each(['{"ID":""}', '{"ID":42}', '{"ID":null}', '{"ID":["a"]}', '{"id":"lowercase"}'])(
    'refuses the missing, empty or non-string ID in %s',
    (text) => {
      const err = thrown(() => parseLockInfo(body(text), false));
      expect(err.code).toBe('invalid_request');
      expect(err.message).toMatch(/no "ID" string/);
    },
  );

  it.each(['{"ID":""}', '{"ID":42}', '{"ID":null}'])(
    'refuses the present but unusable ID in %s even when asked to generate one',
    (text) => {
      expect(thrown(() => parseLockInfo(body(text), true)).code).toBe('invalid_request');
    },
  );

  it('accepts an ID of 256 characters and refuses 257', () => {
    expect(parseLockInfo(body(JSON.stringify({ ID: 'x'.repeat(256) })), false).id).toHaveLength(
      256,
    );
    const err = thrown(() => parseLockInfo(body(JSON.stringify({ ID: 'x'.repeat(257) })), false));
    expect(err.code).toBe('invalid_request');
    expect(err.message).toMatch(/at most 256 printable characters/);
  });

  it.each([
    ['newline', 'a\nb'],
    ['carriage return', 'a\rb'],
    ['tab', 'a\tb'],
    ['NUL', 'a\u0000b'],
    ['escape', 'a\u001bb'],
    ['DEL', 'a\u007fb'],
    ['C1 controls NEL and CSI', 'a\u0085b\u009bc'],
  ])('refuses an ID with a control character (%s)', (_label, id) => {
    const err = thrown(() => parseLockInfo(body(JSON.stringify({ ID: id })), false));
    expect(err.code).toBe('invalid_request');
    expect(err.message).toMatch(/printable characters/);
  });

  it('accepts printable non-ASCII IDs', () => {
    expect(parseLockInfo(body('{"ID":"lock-é-✓"}'), false).id).toBe('lock-é-✓');
  });

  it.each(['{', '{"ID":"x"', 'ID=abc', "{'ID':'x'}", '{"ID":"x"} trailing'])(
    'refuses invalid JSON %j',
    (text) => {
      const err = thrown(() => parseLockInfo(body(text), false));
      expect(err.code).toBe('invalid_request');
      expect(err.message).toMatch(/not valid JSON/);
    },
  );

  it('refuses an empty body when not asked to generate an ID', () => {
    expect(thrown(() => parseLockInfo(body(''), false)).message).toMatch(/not valid JSON/);
  });
});

describe('lockIdFromBody', () => {
  it.each(['', '  ', '\n', ' \r\n\t '])('returns undefined for the empty body %j', (text) => {
    expect(lockIdFromBody(body(text))).toBeUndefined();
  });

  it("returns the ID of Terraform's LockInfo body", () => {
    const text = `{"ID":"${LOCK_ID}","Operation":"OperationTypeApply","Info":"","Who":"alice"}`;
    expect(lockIdFromBody(body(text))).toBe(LOCK_ID);
  });

  it('refuses a LockInfo body without an ID instead of treating it as empty', () => {
    expect(thrown(() => lockIdFromBody(body('{"Who":"alice"}'))).code).toBe('invalid_request');
  });
});
