import {
  COMPLETE_XML_LIMITS,
  decodeReferences,
  parseCompleteMultipartXml,
} from '../../src/s3compat/complete-multipart-xml';
import { S3Error } from '../../src/s3compat/s3-errors';

const xml = (s: string) => Buffer.from(s);
const NS = 'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"';

/** The S3 error code a document is refused with, or 'ok'. */
function code(s: string | Buffer, limits = COMPLETE_XML_LIMITS): string {
  try {
    parseCompleteMultipartXml(Buffer.isBuffer(s) ? s : xml(s), limits);
  } catch (e) {
    expect(e).toBeInstanceOf(S3Error);
    return (e as S3Error).code;
  }
  return 'ok';
}

function messageOf(s: string): string {
  try {
    parseCompleteMultipartXml(xml(s));
  } catch (e) {
    return (e as S3Error).message;
  }
  return 'ok';
}

const part = (n: number, etag = '"a"') =>
  `<Part><PartNumber>${n}</PartNumber><ETag>${etag}</ETag></Part>`;

describe('CompleteMultipartUpload part lists', () => {
  it('reads ETags quoted the way Go writes them (&#34;) and the way the JS SDK does (&quot;)', () => {
    const go =
      `<CompleteMultipartUpload ${NS}><Part><ETag>&#34;9CF588F2&#34;</ETag><PartNumber>1</PartNumber></Part>` +
      '<Part><ETag>&quot;abc&quot;</ETag><PartNumber>2</PartNumber></Part><Part><ETag>"def"</ETag><PartNumber>3</PartNumber></Part></CompleteMultipartUpload>';
    expect(parseCompleteMultipartXml(xml(go))).toEqual([
      { partNumber: 1, etag: '9cf588f2' },
      { partNumber: 2, etag: 'abc' },
      { partNumber: 3, etag: 'def' },
    ]);
  });

  it('reads what SDKs send around the parts: declaration, BOM, comments, white space, checksums, CDATA, prefixes', () => {
    const doc =
      '\ufeff<?xml version="1.0" encoding="UTF-8"?>\n<!-- parts -->\n' +
      `<s3:CompleteMultipartUpload xmlns:s3='http://s3.amazonaws.com/doc/2006-03-01/'>\n` +
      '  <s3:Part>\n    <s3:ChecksumCRC32>AAAAAA==</s3:ChecksumCRC32>\n' +
      '    <s3:ETag> &#x22;AB<![CDATA[cd]]>&#34; </s3:ETag>\n    <s3:PartNumber> 7 </s3:PartNumber>\n  </s3:Part>\n' +
      '  <s3:Part><s3:PartNumber>10000</s3:PartNumber><s3:ETag>"ef"</s3:ETag><s3:Other/></s3:Part >\n' +
      '</s3:CompleteMultipartUpload>\n<!-- end -->\n';
    expect(parseCompleteMultipartXml(xml(doc))).toEqual([
      { partNumber: 7, etag: 'abcd' },
      { partNumber: 10000, etag: 'ef' },
    ]);
  });

  it('refuses parts out of order, missing or doubled fields and documents that are not a part list', () => {
    expect(code(`<CompleteMultipartUpload>${part(2)}${part(1)}</CompleteMultipartUpload>`)).toBe(
      'InvalidPartOrder',
    );
    expect(code(`<CompleteMultipartUpload>${part(1)}${part(1)}</CompleteMultipartUpload>`)).toBe(
      'InvalidPartOrder',
    );
    expect(
      code(
        '<CompleteMultipartUpload><Part><PartNumber>1</PartNumber></Part></CompleteMultipartUpload>',
      ),
    ).toBe('MalformedXML');
    expect(
      code(
        '<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><PartNumber>2</PartNumber><ETag>"a"</ETag></Part></CompleteMultipartUpload>',
      ),
    ).toBe('MalformedXML');
    for (const n of ['0', '10001', '-1', '1e3', '', 'x', '123456'])
      expect(
        code(
          `<CompleteMultipartUpload><Part><PartNumber>${n}</PartNumber><ETag>"a"</ETag></Part></CompleteMultipartUpload>`,
        ),
      ).toBe('MalformedXML');
    expect(code('<CompleteMultipartUpload></CompleteMultipartUpload>')).toBe('MalformedXML');
    expect(code('<CompleteMultipartUpload/>')).toBe('MalformedXML');
    expect(code('hello')).toBe('MalformedXML');
    expect(code('')).toBe('MalformedXML');
    expect(code(`<Other>${part(1)}</Other>`)).toBe('MalformedXML');
  });

  it('refuses documents that are not well-formed, naming the fault', () => {
    const cases: Record<string, string> = {
      unclosed: `<CompleteMultipartUpload>${part(1)}`,
      mismatched: `<CompleteMultipartUpload><Part><PartNumber>1</ETag></Part></CompleteMultipartUpload>`,
      'two roots': `<CompleteMultipartUpload>${part(1)}</CompleteMultipartUpload><CompleteMultipartUpload/>`,
      'text outside': `x<CompleteMultipartUpload>${part(1)}</CompleteMultipartUpload>`,
      'mixed content': `<CompleteMultipartUpload>${part(1)}junk</CompleteMultipartUpload>`,
      doctype: `<!DOCTYPE x [<!ENTITY a "b">]><CompleteMultipartUpload>${part(1)}</CompleteMultipartUpload>`,
      'unknown entity': `<CompleteMultipartUpload>${part(1, '&a;')}</CompleteMultipartUpload>`,
      'bare ampersand': `<CompleteMultipartUpload>${part(1, 'a & b')}</CompleteMultipartUpload>`,
      'NUL reference': `<CompleteMultipartUpload>${part(1, '&#0;')}</CompleteMultipartUpload>`,
      'surrogate reference': `<CompleteMultipartUpload>${part(1, '&#xD800;')}</CompleteMultipartUpload>`,
      'bad attribute': `<CompleteMultipartUpload xmlns=x>${part(1)}</CompleteMultipartUpload>`,
      'unclosed comment': `<CompleteMultipartUpload>${part(1)}<!-- `,
      'unclosed tag': `<CompleteMultipartUpload>${part(1)}</CompleteMultipartUpload`,
      'too deep': `<CompleteMultipartUpload><Part><ETag><x>"a"</x></ETag></Part></CompleteMultipartUpload>`,
    };
    const got: Record<string, string> = {};
    for (const [name, doc] of Object.entries(cases)) got[name] = code(doc);
    expect(got).toEqual(Object.fromEntries(Object.keys(cases).map((k) => [k, 'MalformedXML'])));
    expect(messageOf(cases.unclosed)).toMatch(/ended inside <CompleteMultipartUpload>/);
    expect(messageOf(cases['too deep'])).toMatch(/nested deeper than 3 levels/);
    expect(messageOf(cases.doctype)).toMatch(/document type declarations/);
    expect(code(Buffer.from([0x3c, 0xff, 0x3e]))).toBe('MalformedXML'); // not UTF-8
  });

  it('refuses more than 10,000 parts, text longer than the cap and bodies over the size cap', () => {
    const many = Array.from({ length: 10_001 }, (_, i) => part(i + 1)).join('');
    const doc = `<CompleteMultipartUpload>${many}</CompleteMultipartUpload>`;
    expect(code(doc, { ...COMPLETE_XML_LIMITS, maxBytes: doc.length })).toBe('MalformedXML');
    expect(messageOf(doc)).toMatch(/more than 10000 parts/);
    const exactly = `<CompleteMultipartUpload>${Array.from({ length: 10_000 }, (_, i) => part(i + 1)).join('')}</CompleteMultipartUpload>`;
    expect(parseCompleteMultipartXml(xml(exactly))).toHaveLength(10_000);
    expect(
      code(`<CompleteMultipartUpload>${part(1, 'a'.repeat(1025))}</CompleteMultipartUpload>`),
    ).toBe('MalformedXML');
    expect(code(xml(' '.repeat(COMPLETE_XML_LIMITS.maxBytes + 1)))).toBe('EntityTooLarge');
  });

  it('decodes named, decimal and hexadecimal references and refuses others', () => {
    expect(decodeReferences('&#34;&#x22;&quot;&amp;&lt;&gt;&apos;&#x1F600;')).toBe(
      '"""&<>\'\u{1F600}',
    );
    for (const bad of ['&bogus;', '&#0;', '&#;', '&#x;', '&#12a;', '&', '&amp', '&#1234567890;'])
      expect(() => decodeReferences(bad)).toThrow(S3Error);
  });
});
