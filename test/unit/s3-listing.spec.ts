import fc from 'fast-check';
import {
  compareKeys,
  ListedObject,
  listBucketResultV1,
  listBucketResultV2,
  listPage,
  listRequestV1,
  listRequestV2,
  sortForListing,
} from '../../src/s3compat/listing';
import { encodeCursor } from '../../src/common/cursor';
import { S3Error } from '../../src/s3compat/s3-errors';

/**
 * The S3 door's bucket listings as pure functions (src/s3compat/listing.ts): ListObjects (v1,
 * paged by marker — rclone and s3cmd) and ListObjectsV2 (paged by continuation token) share one
 * paging and grouping rule. Pages are read back from the XML the way clients read them.
 */

const RUNS = Number(process.env.FUZZ_RUNS ?? 300);
const AT = new Date('2026-12-01T10:00:00.000Z');

const objects = (...keys: string[]): ListedObject[] =>
  sortForListing(keys.map((key) => ({ key, size: key.length, md5: 'd41d8cd9', modified: AT })));

const query = (params: Record<string, string>): Map<string, string> =>
  new Map(Object.entries(params));

const unescapeXml = (s: string): string =>
  s
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'")
    .replace(/&amp;/g, '&');

/** What a client reads from a ListBucketResult (values url-decoded under encoding-type=url). */
function read(xml: string, urlEncoded: boolean) {
  const decode = (s: string) => (urlEncoded ? decodeURIComponent(s) : s);
  const all = (tag: string, inside?: string) => {
    const scope = inside
      ? [...xml.matchAll(new RegExp(`<${inside}>(.*?)</${inside}>`, 'gs'))].map((m) => m[1])
      : [xml];
    return scope.flatMap((s) =>
      [...s.matchAll(new RegExp(`<${tag}>(.*?)</${tag}>`, 'gs'))].map((m) =>
        decode(unescapeXml(m[1])),
      ),
    );
  };
  const one = (tag: string) => {
    const m = new RegExp(`<${tag}>(.*?)</${tag}>`, 's').exec(xml);
    return m ? decode(unescapeXml(m[1])) : undefined;
  };
  return {
    keys: all('Key', 'Contents'),
    prefixes: all('Prefix', 'CommonPrefixes'),
    truncated: one('IsTruncated') === 'true',
    nextMarker: one('NextMarker'),
    nextToken: /<NextContinuationToken>(.*?)<\/NextContinuationToken>/.exec(xml)?.[1],
    marker: one('Marker'),
    prefix: /<Name>.*?<\/Name><Prefix>(.*?)<\/Prefix>/.exec(xml)?.[1],
  };
}

/** A page's keys and common prefixes in listing order (the XML lists Contents, then CommonPrefixes). */
const inOrder = (xs: string[]): string[] => [...xs].sort(compareKeys);

/** Every page of a v1 listing, following NextMarker as rclone and s3cmd do. */
function pagesV1(all: ListedObject[], params: Record<string, string>) {
  const seen: string[] = [];
  let marker: string | undefined;
  for (let page = 0; page < 10_000; page++) {
    const q = query({ ...params, ...(marker !== undefined ? { marker } : {}) });
    const r = listRequestV1(q);
    const got = read(listBucketResultV1('tfstate', r, listPage(all, r), q), r.urlEncode);
    seen.push(...inOrder([...got.keys, ...got.prefixes]));
    if (!got.truncated) return seen;
    expect(got.nextMarker).toBeDefined();
    marker = got.nextMarker;
  }
  throw new Error('the listing never ended');
}

/** Every page of a v2 listing, following NextContinuationToken. */
function pagesV2(all: ListedObject[], params: Record<string, string>) {
  const seen: string[] = [];
  let token: string | undefined;
  for (let page = 0; page < 10_000; page++) {
    const q = query({
      ...params,
      'list-type': '2',
      ...(token !== undefined ? { 'continuation-token': token } : {}),
    });
    const r = listRequestV2(q);
    const got = read(listBucketResultV2('tfstate', r, listPage(all, r), q), r.urlEncode);
    seen.push(...inOrder([...got.keys, ...got.prefixes]));
    if (!got.truncated) return seen;
    expect(got.nextToken).toBeDefined();
    token = got.nextToken;
  }
  throw new Error('the listing never ended');
}

describe('ListObjects (v1): marker, prefix, delimiter, max-keys, encoding-type', () => {
  const all = objects(
    'a/1/terraform.tfstate',
    'a/2/terraform.tfstate',
    'a.tfstate',
    'b/terraform.tfstate',
    'c.tfstate',
  );

  it('a truncated page always carries NextMarker: the last key returned (without a delimiter too)', () => {
    const q = query({ 'max-keys': '2' });
    const r = listRequestV1(q);
    const got = read(listBucketResultV1('tfstate', r, listPage(all, r), q), false);
    expect(got).toMatchObject({
      keys: ['a.tfstate', 'a/1/terraform.tfstate'],
      truncated: true,
      nextMarker: 'a/1/terraform.tfstate',
      marker: '',
    });
  });

  it('a truncated page that ends with a common prefix names that prefix as NextMarker', () => {
    const q = query({ delimiter: '/', 'max-keys': '2' });
    const r = listRequestV1(q);
    const got = read(listBucketResultV1('tfstate', r, listPage(all, r), q), false);
    expect(got).toMatchObject({
      keys: ['a.tfstate'],
      prefixes: ['a/'],
      truncated: true,
      nextMarker: 'a/',
    });
  });

  it('a marker equal to a common prefix skips everything under it', () => {
    const q = query({ delimiter: '/', marker: 'a/' });
    const r = listRequestV1(q);
    const got = read(listBucketResultV1('tfstate', r, listPage(all, r), q), false);
    expect(got).toMatchObject({
      keys: ['c.tfstate'],
      prefixes: ['b/'],
      truncated: false,
      nextMarker: undefined,
      marker: 'a/',
    });
  });

  it('a marker is where the listing starts, after it (without a delimiter, keys under it follow)', () => {
    const q = query({ marker: 'a/1/terraform.tfstate' });
    const r = listRequestV1(q);
    expect(listPage(all, r).contents.map((o) => o.key)).toEqual([
      'a/2/terraform.tfstate',
      'b/terraform.tfstate',
      'c.tfstate',
    ]);
  });

  it('prefix and delimiter group below the prefix only', () => {
    const q = query({ prefix: 'a/', delimiter: '/' });
    const r = listRequestV1(q);
    const got = read(listBucketResultV1('tfstate', r, listPage(all, r), q), false);
    expect(got).toMatchObject({ keys: [], prefixes: ['a/1/', 'a/2/'], truncated: false });
  });

  it('encoding-type=url encodes keys, prefixes, markers and NextMarker (not /); clients decode them', () => {
    const odd = objects('sp ace/x.tfstate', 'plus+/x.tfstate', 'ünï/x.tfstate', 'amp&/x.tfstate');
    const q = query({ 'encoding-type': 'url', delimiter: '/', 'max-keys': '1', marker: 'a b' });
    const r = listRequestV1(q);
    const xml = listBucketResultV1('tfstate', r, listPage(odd, r), q);
    expect(xml).toContain('<EncodingType>url</EncodingType>');
    expect(xml).toContain('<Marker>a%20b</Marker>');
    expect(xml).toContain('<Prefix>amp%26/</Prefix>');
    expect(xml).toContain('<NextMarker>amp%26/</NextMarker>');
    expect(xml).toContain('<Delimiter>/</Delimiter>');
    expect(pagesV1(odd, { 'encoding-type': 'url', 'max-keys': '1' })).toEqual(
      odd.map((o) => o.key),
    );
  });

  it('max-keys 0 is an empty page that is not truncated; more than 1000 is 1000', () => {
    const zero = listRequestV1(query({ 'max-keys': '0' }));
    expect(listPage(all, zero)).toEqual({
      contents: [],
      commonPrefixes: [],
      truncated: false,
      next: undefined,
    });
    expect(listRequestV1(query({ 'max-keys': '5000' })).maxKeys).toBe(1000);
  });

  it('a bad max-keys or encoding-type is InvalidArgument', () => {
    const bad: Record<string, string>[] = [
      { 'max-keys': '-1' },
      { 'max-keys': 'x' },
      { 'encoding-type': 'xml' },
    ];
    for (const params of bad) {
      let code: string | undefined;
      try {
        listRequestV1(query(params));
      } catch (e) {
        code = e instanceof S3Error ? e.code : 'not an S3Error';
      }
      expect({ params, code }).toEqual({ params, code: 'InvalidArgument' });
    }
  });
});

describe('both listing versions page to the same whole listing, whatever the page size', () => {
  const key = fc
    .array(fc.constantFrom('a', 'b', '/', ' ', '+', 'é', '😀', '\uE000', '&'), {
      minLength: 1,
      maxLength: 6,
    })
    .map((chars) => chars.join(''));

  it('following NextMarker (v1) or NextContinuationToken (v2) returns every key or common prefix once, in order', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(key, { maxLength: 25 }),
        fc.constantFrom('', '/', 'b'),
        fc.constantFrom('', 'a', 'a/'),
        fc.integer({ min: 1, max: 6 }),
        fc.boolean(),
        (keys, delimiter, prefix, maxKeys, url) => {
          const all = objects(...keys);
          const params = {
            delimiter,
            prefix,
            ...(url ? { 'encoding-type': 'url' } : {}),
          };
          const whole = listPage(all, listRequestV1(query(params)));
          const expected = inOrder([...whole.contents.map((o) => o.key), ...whole.commonPrefixes]);
          expect(pagesV1(all, { ...params, 'max-keys': String(maxKeys) })).toEqual(expected);
          expect(pagesV2(all, { ...params, 'max-keys': String(maxKeys) })).toEqual(expected);
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('listing order is the byte order of the UTF-8 keys (as S3 lists), not UTF-16 order', () => {
    expect(compareKeys('\uE000', '😀')).toBeLessThan(0); // '😀' < '\uE000' in UTF-16
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), fc.string({ unit: 'grapheme' }), (a, b) => {
        expect(Math.sign(compareKeys(a, b))).toBe(
          Math.sign(Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'))),
        );
      }),
      { numRuns: RUNS * 3 },
    );
  });
});

describe('paging and grouping, as tables (v1 and v2 share listPage)', () => {
  const all = objects('a', 'a/', 'a//b', 'a/b/c', 'a/b/d', 'a/c', 'b', 'b//', 'c/d/e');
  type Row = [
    string,
    Record<string, string>,
    { keys: string[]; prefixes: string[]; next?: string },
  ];
  const page = (r: ReturnType<typeof listRequestV1>) => {
    const p = listPage(all, r);
    return {
      keys: p.contents.map((o) => o.key),
      prefixes: p.commonPrefixes,
      ...(p.truncated ? { next: p.next } : {}),
    };
  };
  const rows: Row[] = [
    ['empty prefix, no delimiter: every key', {}, { keys: all.map((o) => o.key), prefixes: [] }],
    [
      'delimiter: keys without it, one common prefix per first segment',
      { delimiter: '/' },
      { keys: ['a', 'b'], prefixes: ['a/', 'b/', 'c/'] },
    ],
    [
      'a key ending in the delimiter rolls into its own common prefix',
      { delimiter: '/', prefix: 'a' },
      { keys: ['a'], prefixes: ['a/'] },
    ],
    [
      'prefix ending in the delimiter: the prefix itself is a key, a repeated delimiter a prefix',
      { delimiter: '/', prefix: 'a/' },
      { keys: ['a/', 'a/c'], prefixes: ['a//', 'a/b/'] },
    ],
    [
      'a multi-character delimiter, repeated in keys',
      { delimiter: '//' },
      { keys: ['a', 'a/', 'a/b/c', 'a/b/d', 'a/c', 'b', 'c/d/e'], prefixes: ['a//', 'b//'] },
    ],
    ['a prefix nothing starts with', { prefix: 'z', delimiter: '/' }, { keys: [], prefixes: [] }],
    [
      'max-keys 1: one entry, truncated, the next page starts after it',
      { 'max-keys': '1', delimiter: '/' },
      { keys: ['a'], prefixes: [], next: 'a' },
    ],
    [
      'a common prefix counts once against max-keys',
      { 'max-keys': '2', delimiter: '/' },
      { keys: ['a'], prefixes: ['a/'], next: 'a/' },
    ],
    [
      'max-keys equal to what is left: not truncated',
      { 'max-keys': '5', delimiter: '/' },
      { keys: ['a', 'b'], prefixes: ['a/', 'b/', 'c/'] },
    ],
    [
      'max-keys 0: empty and not truncated',
      { 'max-keys': '0', delimiter: '/' },
      { keys: [], prefixes: [] },
    ],
    [
      'max-keys with leading zeros',
      { 'max-keys': '0001' },
      { keys: ['a'], prefixes: [], next: 'a' },
    ],
  ];

  it.each(rows)('v1: %s', (_what, params, expected) => {
    expect(page(listRequestV1(query(params)))).toEqual(expected);
  });

  it.each(rows)('v2: %s', (_what, params, expected) => {
    expect(page(listRequestV2(query({ ...params, 'list-type': '2' })))).toEqual(expected);
  });

  const starts: Array<[string, Record<string, string>, string[]]> = [
    ['v1 marker before every key', { marker: '' }, ['a', 'a/', 'b', 'b/', 'c/']],
    ['v1 marker between keys', { marker: 'a0' }, ['b', 'b/', 'c/']],
    ['v1 marker inside a common prefix skips it', { marker: 'a/b/c' }, ['b', 'b/', 'c/']],
    ['v1 marker after every key', { marker: 'd' }, []],
    ['v2 start-after', { 'list-type': '2', 'start-after': 'a/' }, ['b', 'b/', 'c/']],
    [
      'v2 continuation token wins over start-after',
      { 'list-type': '2', 'start-after': 'a/', 'continuation-token': encodeCursor('b') },
      ['b/', 'c/'],
    ],
  ];
  it.each(starts)('%s', (_what, params, expected) => {
    const q = query({ ...params, delimiter: '/' });
    const r = q.has('list-type') ? listRequestV2(q) : listRequestV1(q);
    const p = listPage(all, r);
    expect(inOrder([...p.contents.map((o) => o.key), ...p.commonPrefixes])).toEqual(expected);
  });

  it('more than 1000 keys: pages of 1000 whatever max-keys asks, then the rest', () => {
    const many = objects(
      ...Array.from({ length: 1001 }, (_, i) => `k${String(i).padStart(4, '0')}`),
    );
    for (const maxKeys of ['1000', '1001', '5000', '9999999999']) {
      const first = listPage(many, listRequestV2(query({ 'list-type': '2', 'max-keys': maxKeys })));
      expect(first.contents).toHaveLength(1000);
      expect(first).toMatchObject({ truncated: true, next: 'k0999' });
      const q = query({ 'list-type': '2', 'continuation-token': encodeCursor('k0999') });
      const second = listPage(many, listRequestV2(q));
      expect(second.contents.map((o) => o.key)).toEqual(['k1000']);
      expect(second.truncated).toBe(false);
    }
    expect(listPage(many.slice(0, 1000), listRequestV1(query({}))).truncated).toBe(false);
  });

  it('v2: KeyCount counts keys and common prefixes; the token is the cursor of the last entry', () => {
    const q = query({ 'list-type': '2', delimiter: '/', 'max-keys': '3' });
    const r = listRequestV2(q);
    const xml = listBucketResultV2('tfstate', r, listPage(all, r), q);
    expect(xml).toContain('<KeyCount>3</KeyCount><IsTruncated>true</IsTruncated>');
    expect(xml).toContain(`<NextContinuationToken>${encodeCursor('b')}</NextContinuationToken>`);
    expect(xml).not.toContain('<ContinuationToken>');
    const zero = query({ 'list-type': '2', 'max-keys': '0' });
    const rz = listRequestV2(zero);
    expect(listBucketResultV2('tfstate', rz, listPage(all, rz), zero)).toContain(
      '<MaxKeys>0</MaxKeys><KeyCount>0</KeyCount><IsTruncated>false</IsTruncated>',
    );
  });

  it('v1: NextMarker only on a truncated page; Marker echoes the request', () => {
    const q = query({ delimiter: '/', marker: 'a0', 'max-keys': '1' });
    const r = listRequestV1(q);
    const xml = listBucketResultV1('tfstate', r, listPage(all, r), q);
    expect(xml).toContain('<Marker>a0</Marker>');
    expect(xml).toContain('<NextMarker>b</NextMarker>');
    const rest = query({ delimiter: '/', marker: 'b/' });
    const rr = listRequestV1(rest);
    expect(listBucketResultV1('tfstate', rr, listPage(all, rr), rest)).not.toContain('NextMarker');
  });

  const badTokens: Array<[string, string]> = [
    ['empty', ''],
    ['not base64url', '!!'],
    ['padded base64', `${encodeCursor('a')}==`],
    ['standard base64 alphabet', Buffer.from('\u00ff\u00fe').toString('base64')],
    ['decodes to bytes that are not UTF-8', Buffer.from([0xff]).toString('base64url')],
  ];
  it.each(badTokens)('v2: a continuation token that is %s is InvalidArgument', (_what, token) => {
    let error: unknown;
    try {
      listRequestV2(query({ 'list-type': '2', 'continuation-token': token }));
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(S3Error);
    expect(error).toMatchObject({
      code: 'InvalidArgument',
      message: 'The continuation token provided is incorrect',
    });
  });

  const badMaxKeys = ['', '-1', '1.5', ' 1', '12345678901', 'x'];
  it.each(badMaxKeys)('max-keys %p is InvalidArgument (v1 and v2)', (maxKeys) => {
    for (const read of [listRequestV1, listRequestV2]) {
      expect(() => read(query({ 'max-keys': maxKeys }))).toThrow(S3Error);
    }
  });
});
