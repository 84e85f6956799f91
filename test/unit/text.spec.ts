/**
 * Text the database cannot store (src/common/text.ts), the global request pipe built on it
 * (src/common/request-text.pipe.ts), and the last line of defence in the error mapping: a
 * PostgreSQL encoding error is a 400, never a 500.
 */
import fc from 'fast-check';
import { QueryFailedError } from 'typeorm';
import { isUnstorableText, toDomainError } from '../../src/common/error-mapping';
import { DomainError } from '../../src/common/errors';
import { MAX_REQUEST_JSON_DEPTH, RequestTextPipe } from '../../src/common/request-text.pipe';
import { capText, escapeUnstorable, findUnstorableText, textProblem } from '../../src/common/text';

/** Any UTF-16 string: lone surrogates and NUL included. */
const anyUnits = fc.string({
  unit: fc.oneof(
    fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)),
    fc.constantFrom('\u0000', '\ud800', '\udfff', '\ud83d\ude00', 'a'),
  ),
  maxLength: 30,
});

describe('textProblem and escapeUnstorable', () => {
  it.each([
    ['plain', undefined],
    ['', undefined],
    ['a\u0000b', 'a NUL character'],
    ['\ud83d\ude00 pair', undefined],
    ['\ud800', 'an unpaired UTF-16 surrogate'],
    ['x\udc00', 'an unpaired UTF-16 surrogate'],
    ['\udc00\ud800', 'an unpaired UTF-16 surrogate'],
    ['\ud800\ud800\udc00', 'an unpaired UTF-16 surrogate'],
  ])('%j → %s', (s, problem) => {
    expect(textProblem(s)).toBe(problem);
  });

  it('escapes exactly what cannot be stored, and leaves storable text alone', () => {
    fc.assert(
      fc.property(anyUnits, (s) => {
        const escaped = escapeUnstorable(s);
        expect(textProblem(escaped)).toBeUndefined();
        if (textProblem(s) === undefined) expect(escaped).toBe(s);
        // Undoing the escapes of the text (which had no backslash) gives it back.
        if (!s.includes('\\')) {
          expect(
            escaped.replace(/\\u([0-9a-f]{4})/g, (_, h: string) =>
              String.fromCharCode(parseInt(h, 16)),
            ),
          ).toBe(s);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('caps text without leaving half a surrogate pair', () => {
    fc.assert(
      fc.property(anyUnits, fc.integer({ min: 2, max: 40 }), (s, max) => {
        const storable = escapeUnstorable(s);
        const capped = capText(storable, max);
        expect(capped.length).toBeLessThanOrEqual(max);
        expect(textProblem(capped)).toBeUndefined();
        if (storable.length <= max) expect(capped).toBe(storable);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('findUnstorableText', () => {
  it('names the first bad string by its path, member names included', () => {
    expect(findUnstorableText({ a: 'ok', rules: [{ r: ['x', 'y\u0000'] }] }, 64)).toEqual({
      path: 'rules[0].r[1]',
      problem: 'a NUL character',
    });
    expect(findUnstorableText({ 'we ird\ud800': 1 }, 64)).toEqual({
      path: '"we ird\\ud800"',
      problem: 'an unpaired UTF-16 surrogate',
    });
    expect(findUnstorableText('\u0000', 64, 'prefix')).toEqual({
      path: 'prefix',
      problem: 'a NUL character',
    });
    expect(findUnstorableText({ a: [1, true, null, 'x'] }, 64)).toBeUndefined();
  });

  it('walks a million levels of nesting without recursion, refusing past the limit', () => {
    let deep: unknown = 'x';
    for (let i = 0; i < 1_000_000; i++) deep = [deep];
    expect(findUnstorableText(deep, 64)).toMatchObject({ problem: 'nesting' });
    expect(findUnstorableText(deep, Infinity)).toBeUndefined();
  });

  it('finds a planted NUL or unpaired surrogate in any JSON document, and nothing in a clean one', () => {
    const bad = fc.constantFrom('\u0000', '\ud800', '\udfff');
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 5 }), fc.nat(), bad, (doc, at, ch) => {
        const clean = JSON.parse(JSON.stringify(doc).replace(/\\u0000/g, '')) as unknown;
        expect(findUnstorableText(clean, Infinity)).toBeUndefined();
        // Plant it in one string (value or member name).
        let count = 0;
        const plant = (v: unknown): unknown => {
          if (typeof v === 'string') return count++ === at % 50 ? v + ch : v;
          if (Array.isArray(v)) return v.map(plant);
          if (v === null || typeof v !== 'object') return v;
          return Object.fromEntries(
            Object.entries(v).map(([k, x]) => [count++ === at % 50 ? k + ch : k, plant(x)]),
          );
        };
        const planted = plant(clean);
        if (count > at % 50) expect(findUnstorableText(planted, Infinity)).toBeDefined();
      }),
      { numRuns: 1000 },
    );
  });
});

describe('RequestTextPipe', () => {
  const pipe = new RequestTextPipe();
  const refusal = (value: unknown, type: 'body' | 'query' | 'param', data?: string): string => {
    try {
      pipe.transform(value, { type, data });
    } catch (e) {
      expect(e).toBeInstanceOf(DomainError);
      expect((e as DomainError).code).toBe('invalid_request');
      return (e as DomainError).message;
    }
    throw new Error('accepted');
  };

  it('refuses a NUL or an unpaired surrogate in a body, naming the field', () => {
    expect(refusal({ name: 'p', description: 'a\u0000b' }, 'body')).toBe(
      '"description" contains a NUL character, which is not allowed in request strings',
    );
    expect(refusal({ rules: [{ resources: ['ok', '\ud800'] }] }, 'body')).toBe(
      '"rules[0].resources[1]" contains an unpaired UTF-16 surrogate, which is not allowed in request strings',
    );
  });

  it('refuses them in query and path parameters too', () => {
    expect(refusal({ prefix: 'a\u0000' }, 'query')).toBe(
      'query parameter "prefix" contains a NUL character, which is not allowed in request strings',
    );
    expect(refusal('team\u0000', 'param', 'name')).toBe(
      'path parameter "name" contains a NUL character, which is not allowed in request strings',
    );
  });

  it(`refuses a body nested deeper than ${MAX_REQUEST_JSON_DEPTH} levels`, () => {
    let deep: unknown = 1;
    for (let i = 0; i < 200_000; i++) deep = [deep];
    expect(refusal({ description: deep }, 'body')).toMatch(
      /^"description(\[0\])+" nests arrays and objects deeper than 64 levels$/,
    );
  });

  it('passes everything else through unchanged, and leaves custom arguments alone', () => {
    const body = { name: 'p', rules: [{ effect: 'allow', n: 1, pair: '\ud83d\ude00' }] };
    expect(pipe.transform(body, { type: 'body' })).toBe(body);
    const principal = { subject: 'x\u0000' };
    expect(pipe.transform(principal, { type: 'custom' })).toBe(principal);
  });
});

describe('encoding errors from PostgreSQL', () => {
  const pgError = (code: string, message: string) =>
    new QueryFailedError('INSERT …', [], Object.assign(new Error(message), { code }));

  it.each([
    ['22021', 'invalid byte sequence for encoding "UTF8": 0x00'],
    ['22P05', 'unsupported Unicode escape sequence'],
    ['22P02', 'invalid input syntax for type json'],
  ])('%s (%s) is a 400 invalid_request, not a 500', (code, message) => {
    const e = pgError(code, message);
    if (code === '22P02') {
      // 22P02 alone is any bad literal; it is an encoding error only with a Unicode message.
      expect(isUnstorableText(e)).toBe(false);
      const surrogate = pgError(code, 'Unicode low surrogate must follow a high surrogate.');
      expect(toDomainError(surrogate)).toMatchObject({ code: 'invalid_request' });
      return;
    }
    expect(isUnstorableText(e)).toBe(true);
    expect(toDomainError(e)).toMatchObject({ code: 'invalid_request' });
  });

  it('other database errors stay internal', () => {
    expect(toDomainError(pgError('23505', 'duplicate key'))).toMatchObject({ code: 'internal' });
  });
});
