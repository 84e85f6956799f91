import { runInNewContext } from 'node:vm';
import { trimBoth, trimEnd, trimOws } from '../../src/common/trim';
import { unitNameFromRawPath } from '../../src/common/names';
import {
  normaliseBase,
  resolveRemoteState,
  SelfAddresses,
  splitHttpAddress,
} from '../../src/graph/remote-config';
import { AwsChunkedParser } from '../../src/s3compat/aws-chunked';
import {
  COMPLETE_XML_LIMITS,
  parseCompleteMultipartXml,
} from '../../src/s3compat/complete-multipart-xml';
import { S3Error } from '../../src/s3compat/s3-errors';
import { resolveKey } from '../../src/common/s3-keys';
import { parseRange, parseTarget } from '../../src/s3compat/s3-request';
import { escapeXml } from '../../src/s3compat/s3-xml';
import { canonicalQuery, canonicalUriCandidates, parseSigV4 } from '../../src/s3compat/sigv4';
import type { RemoteStateSource } from '../../src/state/state-inspector';

/**
 * No parser of request data does super-linear work (issue 9, item 1): each is fed adversarial
 * inputs of 1 MiB — the shapes that make backtracking regular expressions try every split or
 * every start position — and must finish within a budget that a linear pass meets with room to
 * spare on a loaded machine. The code before the fix needed ~25 s for the first XML case and
 * hours for the remote-state address; a `node:vm` timeout interrupts such a run at the budget
 * (V8 checks for termination inside its regular-expression engine), so a regression fails here
 * in a second instead of hanging the suite.
 */
const MiB = 1024 * 1024;
/**
 * Request lines and headers cannot be longer than Node's limit for the whole head (16 KiB by
 * default; the server does not raise it): those parsers get 64 KiB, four times what can arrive.
 */
const HEAD = 64 * 1024;
const BUDGET_MS = 1000;

/** Runs `fn` and fails when it takes longer than the budget (interrupting it). */
function withinBudget(name: string, fn: () => unknown): number {
  const started = process.hrtime.bigint();
  try {
    runInNewContext('fn()', { fn }, { timeout: BUDGET_MS });
  } catch (e) {
    // Errors from the vm's own realm are not `instanceof Error` here.
    const code = (e as { code?: unknown } | undefined)?.code;
    if (code === 'ERR_SCRIPT_EXECUTION_TIMEOUT') {
      throw new Error(`${name}: not finished after ${BUDGET_MS} ms (super-linear?)`);
    }
    // Refusals are expected: the point is how long they take.
  }
  return Number(process.hrtime.bigint() - started) / 1e6;
}

/** Repeats `unit` to about `bytes` characters, between `head` and `tail`. */
const fill = (head: string, unit: string, tail = '', bytes = MiB): string =>
  head + unit.repeat(Math.floor((bytes - head.length - tail.length) / unit.length)) + tail;

const SELF: SelfAddresses = {
  bases: ['http://127.0.0.1:8080'],
  buckets: ['tfstate'],
  workspacePrefixes: ['env:'],
};
const remote = (backend: string, config: Record<string, unknown>): RemoteStateSource =>
  ({ backend, config, workspace: undefined }) as unknown as RemoteStateSource;

const ROOT = '<CompleteMultipartUpload>';
const xmlCases: Record<string, string> = {
  'Part × 174,000, no closing tags (the reported attack)': fill(ROOT, '<Part>'),
  'unclosed Part and ETag, alternating': fill(ROOT, '<Part><ETag>'),
  'one unclosed ETag holding 1 MiB': fill(`${ROOT}<Part><ETag>`, 'a'),
  'PartNumber tags around white space, never closed': fill(ROOT, '<Part><PartNumber> '),
  'ampersands without references': fill(`${ROOT}<Part><ETag>`, '&'),
  'references that never end': fill(`${ROOT}<Part><ETag>`, '&#3'),
  'a comment that never closes': fill(`${ROOT}<!--`, '-'),
  'CDATA that never closes': fill(`${ROOT}<Part><ETag><![CDATA[`, ']'),
  'an attribute value that never closes': fill('<CompleteMultipartUpload a="', 'x'),
  'a 1 MiB tag name': fill('<', 'a'),
  'end tags without start tags': fill(ROOT, '</'),
  'deep nesting': fill('', '<a>'),
  'white space between elements, then parts': fill(
    ROOT,
    ' ',
    '<Part><PartNumber>1</PartNumber><ETag>"a"</ETag></Part></CompleteMultipartUpload>',
  ),
  'more than 10,000 valid parts': fill(
    ROOT,
    '<Part><PartNumber>1</PartNumber><ETag>"a"</ETag></Part>',
  ),
};

describe('parsers of request data are linear: 1 MiB adversarial inputs finish within the budget', () => {
  it.each(Object.entries(xmlCases))('CompleteMultipartUpload XML: %s', (name, doc) => {
    const body = Buffer.from(doc);
    expect(body.length).toBeLessThanOrEqual(COMPLETE_XML_LIMITS.maxBytes);
    const ms = withinBudget(name, () => parseCompleteMultipartXml(body));
    expect(ms).toBeLessThan(BUDGET_MS);
    if (name.startsWith('white space')) expect(parseCompleteMultipartXml(body)).toHaveLength(1);
    else expect(() => parseCompleteMultipartXml(body)).toThrow(S3Error);
  });

  const remoteCases: Record<string, RemoteStateSource> = {
    'http address: a 1 MiB authority and a fragment': remote('http', {
      address: fill('http://', 'a', '#'),
    }),
    'http address: a 1 MiB path of slashes, then a fragment': remote('http', {
      address: fill('http://127.0.0.1:8080', '/', '#'),
    }),
    'http address: a 1 MiB path under /v1/backend/': remote('http', {
      address: fill('http://127.0.0.1:8080/v1/backend/', 'a/', '?workspace=x'),
    }),
    's3 endpoint: 1 MiB of slashes not at the end': remote('s3', {
      endpoint: fill('http://127.0.0.1:8080', '/', 'x'),
      bucket: 'tfstate',
      key: 'a/terraform.tfstate',
    }),
    's3 key: 1 MiB of segments': remote('s3', {
      endpoint: 'http://127.0.0.1:8080/s3',
      bucket: 'tfstate',
      key: fill('', 'a/', 'terraform.tfstate'),
    }),
  };
  it.each(Object.entries(remoteCases))('terraform_remote_state config: %s', (name, source) => {
    const ms = withinBudget(name, () => resolveRemoteState(source, SELF));
    expect(ms).toBeLessThan(BUDGET_MS);
  });

  it('splitHttpAddress: 1 MiB addresses that a backtracking pattern splits every way', () => {
    for (const address of [
      fill('http://', 'a', '#'),
      fill('http://', 'a', '\n#'),
      fill('https://h', '/', '#'),
      fill('http://h/', 'a?', '#'),
    ]) {
      expect(withinBudget('splitHttpAddress', () => splitHttpAddress(address))).toBeLessThan(
        BUDGET_MS,
      );
      expect(splitHttpAddress(address)).toBeUndefined();
    }
    expect(splitHttpAddress('HTTP://h:1/v1/backend/a%2Fb?workspace=w&x=?')).toEqual({
      origin: 'HTTP://h:1',
      path: '/v1/backend/a%2Fb',
      query: 'workspace=w&x=?',
    });
    expect(splitHttpAddress('http://h?x')).toEqual({ origin: 'http://h', path: '', query: 'x' });
    for (const bad of ['http://', 'http:///x', 'ftp://h/x', 'http://h/x#y', 'h/x'])
      expect(splitHttpAddress(bad)).toBeUndefined();
  });

  it('normaliseBase: 1 MiB of slashes followed by a character', () => {
    const url = fill('http://h', '/', 'a');
    expect(withinBudget('normaliseBase', () => normaliseBase(url))).toBeLessThan(BUDGET_MS);
    expect(normaliseBase('http://h:80/x//')).toBe('http://h/x');
  });

  it('aws-chunked trailers: a value of 1 MiB of blanks between two characters', () => {
    const value = fill('x', ' \t', 'y');
    const ms = withinBudget('aws-chunked trailer', () => {
      const p = new AwsChunkedParser({
        encoding: 'STREAMING-UNSIGNED-PAYLOAD-TRAILER',
        decodedContentLength: 0,
        declaredTrailers: ['x-amz-checksum-crc32'],
        maxTrailerLineLength: 2 * MiB,
      });
      p.push(Buffer.from(`0\r\nx-amz-checksum-crc32:${value}\r\n\r\n`, 'latin1'));
      return p.end();
    });
    expect(ms).toBeLessThan(BUDGET_MS);
  });

  const request = (headers: Record<string, string>, rawPath = '/s3/tfstate/k', rawQuery = '') => ({
    method: 'GET',
    rawPath,
    rawQuery,
    headers: { host: 'h', 'x-amz-date': '20261130T120000Z', ...headers },
  });
  const wireCases: Record<string, () => unknown> = {
    'Authorization: the algorithm, blanks, a vertical tab': () =>
      parseSigV4(request({ authorization: fill('AWS4-HMAC-SHA256', ' ', '\vx', HEAD) })),
    'Authorization: 64 KiB of components': () =>
      parseSigV4(request({ authorization: fill('AWS4-HMAC-SHA256 ', 'Credential=,', 'x', HEAD) })),
    'Range: digits, then junk': () => parseRange(fill('bytes=', '1', '-x', HEAD), 10),
    'Range: dashes after bytes= and no comma': () => parseRange(fill('bytes=', '-', '', HEAD), 10),
    'query: percent signs and pairs': () => canonicalQuery(fill('a=', '%&a=', '', HEAD)),
    'path: encoded slashes': () => canonicalUriCandidates(fill('/s3/', '%2F', '', HEAD)),
    'target: a key of slashes': () => parseTarget(fill('/s3/tfstate/', '/', '?uploads', HEAD)),
    'unit path: segments': () => unitNameFromRawPath(fill('', 'a/', '', HEAD)),
    'S3 key: segments': () => resolveKey(fill('env:/', 'a/', '.tflock', HEAD), ['env:']),
    'XML escaping of 1 MiB of specials': () => escapeXml(fill('', '&<\u0001')),
    'trimming helpers': () => [
      trimEnd(fill('', '/', 'a'), '/'),
      trimBoth(fill('a', '/', 'a'), '/'),
      trimOws(fill('a', ' \t', 'a')),
    ],
  };
  it.each(Object.entries(wireCases))('S3 wire (64 KiB, or 1 MiB for bodies): %s', (name, fn) => {
    expect(withinBudget(name, fn)).toBeLessThan(BUDGET_MS);
  });

  it('the budget is not vacuous: a quadratic pattern on the same input blows it', () => {
    const attack = fill('', '/', 'a', 64 * 1024);
    expect(() => withinBudget('quadratic', () => attack.replace(/\/+$/, ''))).toThrow(
      /not finished/,
    );
  });
});
