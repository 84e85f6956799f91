import fc from 'fast-check';
import { S3Error } from '../../src/s3compat/s3-errors';
import {
  decodePathPart,
  decodeQuery,
  encodeKeyPath,
  encodeListingValue,
  isDecodablePath,
  percentDecode,
  reencodePath,
  splitQuery,
  uriEncodeBytes,
} from '../../src/s3compat/s3-uri';

/**
 * The S3 door's percent-coding (src/s3compat/s3-uri.ts) as tables: the lenient byte-level
 * reading SigV4 and routing share, and the strict JavaScript readings clients expect. The odd
 * inputs are the point: NUL bytes, lone surrogates, `%2F`, `+`, `~`, non-ASCII, broken escapes.
 */

const LONE_SURROGATE = '\uD800';
const hex = (b: Buffer): string => b.toString('hex');
const bytes = (s: string): Buffer => Buffer.from(s, 'utf8');

describe('uriEncodeBytes: AWS UriEncode', () => {
  const table: Array<[string, Buffer, boolean, string]> = [
    ['unreserved characters stay', bytes('AZaz09-_.~'), false, 'AZaz09-_.~'],
    ['a NUL byte', Buffer.from([0]), false, '%00'],
    ['/ kept when asked', bytes('a/b'), true, 'a/b'],
    ['/ encoded otherwise', bytes('a/b'), false, 'a%2Fb'],
    ['+ and space', bytes('+ '), false, '%2B%20'],
    ['% itself', bytes('%'), false, '%25'],
    ['sub-delimiters', bytes("!*'()"), false, '%21%2A%27%28%29'],
    ['non-ASCII, upper-case hex', bytes('ü€'), false, '%C3%BC%E2%82%AC'],
    ['every high byte', Buffer.from([0x80, 0xff]), true, '%80%FF'],
    ['nothing', Buffer.alloc(0), true, ''],
  ];
  it.each(table)('%s', (_what, input, keepSlash, expected) => {
    expect(uriEncodeBytes(input, keepSlash)).toBe(expected);
  });

  it('percentDecode reads back every UriEncoded byte sequence', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 40 }), fc.boolean(), (b, keepSlash) => {
        expect(hex(percentDecode(uriEncodeBytes(b, keepSlash), false))).toBe(hex(Buffer.from(b)));
      }),
    );
  });
});

describe('percentDecode: lenient, byte-level', () => {
  const table: Array<[string, string, boolean, string]> = [
    ['an escape', 'a%20b', false, hex(bytes('a b'))],
    ['+ stays + in a path', 'a+b', false, hex(bytes('a+b'))],
    ['+ is a space in a query', 'a+b', true, hex(bytes('a b'))],
    ['%2B is + even in a query', '%2B', true, hex(bytes('+'))],
    ['a NUL byte', '%00', false, '00'],
    ['%2F and %2f', '%2F%2f', false, hex(bytes('//'))],
    ['~ and %7E', '~%7E%7e', false, hex(bytes('~~~'))],
    ['UTF-8 escapes become their bytes', '%E2%82%AC', false, 'e282ac'],
    ['bytes that are not UTF-8', '%FF%C3', false, 'ffc3'],
    ['a broken escape stays literal', '%zz', false, hex(bytes('%zz'))],
    ['one hex digit stays literal', '%4', false, hex(bytes('%4'))],
    ['a trailing % stays literal', 'ab%', false, hex(bytes('ab%'))],
    ['a % before an escape', '%%41', false, hex(bytes('%A'))],
    ['latin1 byte strings, one byte per char', '\u00c3\u00bc', false, 'c3bc'],
    ['a char above latin1 keeps its low byte', '\u20ac', false, 'ac'],
    ['a lone surrogate keeps its low byte', LONE_SURROGATE, false, '00'],
    ['nothing', '', true, ''],
  ];
  it.each(table)('%s', (_what, input, plusAsSpace, expected) => {
    expect(hex(percentDecode(input, plusAsSpace))).toBe(expected);
  });
});

describe('reencodePath: the SigV4 re-encoding of a raw path', () => {
  const table: Array<[string, string, string]> = [
    ['canonical already', '/s3/tfstate/env%3A/dev/k', '/s3/tfstate/env%3A/dev/k'],
    ['raw reserved characters, %7e, %2f, +', '/a:b/%7e/c%2fd/e+f', '/a%3Ab/~/c%2Fd/e%2Bf'],
    ['%2F stays %2F (upper-cased), never a /', '/a%2fb%2Fc', '/a%2Fb%2Fc'],
    ['an encoded / as %252F stays encoded', '/a%252Fb', '/a%252Fb'],
    ['a NUL byte', '/a%00b', '/a%00b'],
    ['a broken escape becomes %25', '/%zz/%', '/%25zz/%25'],
    ['a latin1 byte string is its bytes', '/\u00c3\u00bc', '/%C3%BC'],
    ['a string above latin1 is taken as UTF-8', '/€', '/%E2%82%AC'],
    ['a lone surrogate becomes U+FFFD', `/${LONE_SURROGATE}`, '/%EF%BF%BD'],
    ['dot segments and // are not normalised', '/./a/../b//c', '/./a/../b//c'],
  ];
  it.each(table)('%s', (_what, input, expected) => {
    expect(reencodePath(input)).toBe(expected);
  });
});

describe('decodeQuery and splitQuery: the query as SigV4 and routing read it', () => {
  const table: Array<[string, string, Array<[string, string]>]> = [
    ['nothing', '', []],
    [
      'UTF-8, + as space, broken escapes, no =, no name',
      'a=%C3%BC+x&b&c=%zz&=v',
      [
        ['a', 'ü x'],
        ['b', ''],
        ['c', '%zz'],
        ['', 'v'],
      ],
    ],
    ['empty parts skipped', '&&a=1&', [['a', '1']]],
    ['the first = splits', 'a=1=2', [['a', '1=2']]],
    ['%2F and %2f', 'prefix=%2F%2f', [['prefix', '//']]],
    ['%2B is +, + is a space', 'k=%2B+', [['k', '+ ']]],
    ['~ and %7E', 'k=~%7E', [['k', '~~']]],
    ['a NUL byte', 'k=%00', [['k', '\0']]],
    ['bytes that are not UTF-8 read as U+FFFD', 'k=%FF', [['k', '\uFFFD']]],
    ['an encoded surrogate reads as U+FFFD', 'k=%ED%A0%80', [['k', '\uFFFD\uFFFD\uFFFD']]],
    ['a string above latin1 is taken as UTF-8', 'k=€', [['k', '€']]],
    [
      'repeated names all kept, in order',
      'a=2&a=1',
      [
        ['a', '2'],
        ['a', '1'],
      ],
    ],
  ];
  it.each(table)('%s', (_what, input, expected) => {
    expect(decodeQuery(input)).toEqual(expected);
    expect(
      splitQuery(input).map((p) => [p.name.toString('utf8'), p.value.toString('utf8')]),
    ).toEqual(expected);
  });

  it('splitQuery keeps the bytes that UTF-8 decoding would lose', () => {
    expect(splitQuery('k%FF=%C3').map((p) => [hex(p.name), hex(p.value)])).toEqual([
      ['6bff', 'c3'],
    ]);
  });
});

describe('decodePathPart: a bucket name or key from the raw path', () => {
  const table: Array<[string, string, string]> = [
    ['%2F is a / inside the key', 'a%2Fb', 'a/b'],
    ['+ stays +', 'a+b', 'a+b'],
    ['~ and %7E', '~%7E', '~~'],
    ['a NUL byte', 'a%00b', 'a\0b'],
    ['UTF-8 escapes', '%C3%BC', 'ü'],
    ['a latin1 byte string of UTF-8', '\u00c3\u00bc', 'ü'],
    ['a broken escape stays literal', '%zz%', '%zz%'],
  ];
  it.each(table)('%s', (_what, input, expected) => {
    expect(decodePathPart(input)).toBe(expected);
  });

  const refused: Array<[string, string]> = [
    ['a byte that is never UTF-8', '%FF'],
    ['a truncated sequence', 'a%C3'],
    ['an encoded lone surrogate', '%ED%A0%80'],
    ['an overlong encoding', '%C0%AF'],
  ];
  it.each(refused)('%s is InvalidArgument', (_what, input) => {
    let code: string | undefined;
    try {
      decodePathPart(input);
    } catch (e) {
      code = e instanceof S3Error ? e.code : 'not an S3Error';
    }
    expect(code).toBe('InvalidArgument');
  });
});

describe('isDecodablePath: what Express could decode', () => {
  const table: Array<[string, string, boolean]> = [
    ['an ordinary path', '/s3/tfstate/team/app/terraform.tfstate', true],
    ['%2F, +, ~, a NUL byte', '/s3/tfstate/a%2Fb+c~%00', true],
    ['UTF-8 escapes', '/s3/tfstate/%C3%BC', true],
    ['a raw non-ASCII char', '/s3/tfstate/ü', true],
    ['nothing', '', true],
    ['a broken escape', '/s3/%ZZ', false],
    ['a lone %', '/s3/a%', false],
    ['a truncated sequence', '/s3/%E0%A4', false],
    ['a byte that is never UTF-8', '/s3/%FF', false],
    ['an encoded lone surrogate', '/s3/%ED%A0%80', false],
  ];
  it.each(table)('%s', (_what, input, expected) => {
    expect(isDecodablePath(input)).toBe(expected);
  });
});

describe('encodeListingValue and encodeKeyPath: what clients decode back', () => {
  const listing: Array<[string, string, string]> = [
    ['/ stays, space encoded', 'a/b c', 'a/b%20c'],
    ['+ and &', '+&', '%2B%26'],
    ['~ and sub-delimiters stay', "~!'()*", "~!'()*"],
    ['a literal %2F is encoded again', '%2F', '%252F'],
    ['a NUL byte', '\0', '%00'],
    ['non-ASCII as UTF-8', 'ü😀', '%C3%BC%F0%9F%98%80'],
    ['nothing', '', ''],
  ];
  it.each(listing)('listing: %s', (_what, input, expected) => {
    expect(encodeListingValue(input)).toBe(expected);
    expect(decodeURIComponent(encodeListingValue(input))).toBe(input);
  });

  const keys: Array<[string, string, string]> = [
    ['each segment encoded, / kept', 'env:/dev/a b.tfstate', 'env%3A/dev/a%20b.tfstate'],
    ['empty segments kept', 'a//b/', 'a//b/'],
    ['~ stays, + encoded', '~+', '~%2B'],
    ['a NUL byte', 'a\0', 'a%00'],
    ['non-ASCII as UTF-8', 'ü/€', '%C3%BC/%E2%82%AC'],
  ];
  it.each(keys)('key path: %s', (_what, input, expected) => {
    expect(encodeKeyPath(input)).toBe(expected);
  });

  it('a lone surrogate cannot be encoded (URIError), as encodeURIComponent', () => {
    expect(() => encodeListingValue(`a${LONE_SURROGATE}`)).toThrow(URIError);
    expect(() => encodeKeyPath(`a/${LONE_SURROGATE}`)).toThrow(URIError);
  });
});

describe('percentDecode of text with nothing to decode', () => {
  it('answers each character as its low byte, as when decoding escapes (chars past 0xFF too)', () => {
    for (const s of ['', 'eyJhbGciOiJFZERTQSJ9.x_y-z', 'a+b', '\u0100\u20acA\ud800', 'é~*']) {
      const expected = Buffer.from(
        [...s].flatMap((ch) => [...ch].map((c) => c.charCodeAt(0) & 0xff)),
      );
      const plus = Buffer.from(expected.map((b) => (b === 0x2b ? 0x20 : b)));
      expect(percentDecode(s, false)).toEqual(expected);
      expect(percentDecode(s, true)).toEqual(plus);
    }
  });
});
