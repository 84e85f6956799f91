import { S3Error } from '../../src/s3compat/s3-errors';
import { decodeXmlText, parseCompleteXml } from '../../src/s3compat/s3.service';

const xml = (s: string) => Buffer.from(s);

describe('CompleteMultipartUpload part lists', () => {
  it('reads ETags quoted the way Go writes them (&#34;) and the way the JS SDK does (&quot;)', () => {
    const go =
      '<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Part><ETag>&#34;9CF588F2&#34;</ETag><PartNumber>1</PartNumber></Part>' +
      '<Part><ETag>&quot;abc&quot;</ETag><PartNumber>2</PartNumber></Part><Part><ETag>"def"</ETag><PartNumber>3</PartNumber></Part></CompleteMultipartUpload>';
    expect(parseCompleteXml(xml(go))).toEqual([
      { partNumber: 1, etag: '9cf588f2' },
      { partNumber: 2, etag: 'abc' },
      { partNumber: 3, etag: 'def' },
    ]);
  });

  it('refuses parts out of order, missing fields and documents that are not a part list', () => {
    const code = (s: string) => {
      try {
        parseCompleteXml(xml(s));
      } catch (e) {
        return (e as S3Error).code;
      }
      return 'ok';
    };
    expect(
      code(
        '<CompleteMultipartUpload><Part><ETag>"a"</ETag><PartNumber>2</PartNumber></Part><Part><ETag>"b"</ETag><PartNumber>1</PartNumber></Part></CompleteMultipartUpload>',
      ),
    ).toBe('InvalidPartOrder');
    expect(
      code(
        '<CompleteMultipartUpload><Part><PartNumber>1</PartNumber></Part></CompleteMultipartUpload>',
      ),
    ).toBe('MalformedXML');
    expect(code('<CompleteMultipartUpload></CompleteMultipartUpload>')).toBe('MalformedXML');
    expect(code('hello')).toBe('MalformedXML');
  });

  it('decodes named, decimal and hexadecimal references, and leaves unknown ones alone', () => {
    expect(decodeXmlText('&#34;&#x22;&quot;&amp;&lt;&gt;&apos;&bogus;&#0;')).toBe(
      '"""&<>\'&bogus;&#0;',
    );
  });
});
