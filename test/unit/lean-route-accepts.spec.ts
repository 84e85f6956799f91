import type { IncomingMessage } from 'node:http';
import { BackendLockRoute } from '../../src/backend/backend-lock.route';
import { BackendReadRoute } from '../../src/backend/backend-read.route';
import { S3ListRoute } from '../../src/s3compat/s3-list.route';
import { S3ReadRoute } from '../../src/s3compat/s3-read.route';
import { S3WriteRoute } from '../../src/s3compat/s3-write.route';
import { s3Operation } from '../../src/s3compat/s3-operation';
import { markAtRoot } from '../../src/s3compat/s3-request';

/**
 * Which requests the lean read routes take (src/lean-routes.ts). The S3 door's: exactly the plain GetObject and
 * HeadObject the controller would dispatch to `getObject`; everything else stays with Express.
 */
const route = new S3ReadRoute(undefined as never, undefined as never);

function request(
  method: string,
  url: string,
  headers: Record<string, string> = {},
  atRoot = false,
) {
  const req = { method, url, headers } as unknown as IncomingMessage & { originalUrl?: string };
  if (atRoot) {
    markAtRoot(req);
    req.originalUrl = url;
    req.url = `/s3${url}`;
  }
  return req;
}

const PRESIGNED =
  'X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Content-Sha256=UNSIGNED-PAYLOAD&X-Amz-Credential=a&X-Amz-Date=b&X-Amz-Expires=900&X-Amz-Signature=c&X-Amz-SignedHeaders=host&x-id=GetObject&X-Amz-Security-Token=d';

describe('S3ReadRoute.accepts', () => {
  it.each([
    ['GET', '/s3/tfstate/team/app.tfstate'],
    ['HEAD', '/s3/tfstate/team/app.tfstate'],
    ['GET', '/s3/tfstate/team/app.tfstate.tflock'],
    ['GET', '/s3/tfstate/a%20b/c'],
    ['GET', '/s3/tfstate/k?x-id=GetObject'],
  ])('takes %s %s', (method, url) => {
    expect(route.accepts(request(method, url))).toBe(true);
  });

  it('takes a presigned GetObject, and one at the root of the S3 listener', () => {
    expect(route.accepts(request('GET', `/s3/tfstate/k?${PRESIGNED}`))).toBe(true);
    expect(route.accepts(request('GET', '/tfstate/team/app.tfstate', {}, true))).toBe(true);
  });

  it.each([
    ['PUT', '/s3/tfstate/k', 'a write'],
    ['DELETE', '/s3/tfstate/k', 'a delete'],
    ['POST', '/s3/tfstate/k?uploads', 'a multipart start'],
    ['GET', '/s3', 'the service'],
    ['GET', '/s3/', 'the service'],
    ['GET', '/s3/tfstate', 'a bucket'],
    ['GET', '/s3/tfstate/', 'a bucket (empty key)'],
    ['GET', '/s3//k', 'an empty bucket name'],
    ['GET', '/s3x/tfstate/k', 'another path'],
    ['GET', '/v1/backend/a', 'another door'],
    ['GET', '/S3/tfstate/k', 'the prefix in another case (the router decides)'],
    ['GET', '/s3/tfstate/k?acl', 'a sub-resource'],
    ['GET', '/s3/tfstate/k?uploadId=1', 'ListParts'],
    ['GET', '/s3/tfstate/k?versionId=3', 'a version'],
    ['GET', '/s3/tfstate/k?response-content-type=text/plain', 'an override'],
    ['GET', '/s3/tfstate/k?X-Amz-Signature=a&list-type=2', 'a parameter after presigning'],
    ['GET', '/s3/tfstate/k%ZZ', 'a malformed escape'],
    ['GET', '/s3/tfstate/%E0%A4', 'bytes that are not UTF-8'],
  ])('leaves %s %s to the controller (%s)', (method, url) => {
    expect(route.accepts(request(method, url))).toBe(false);
  });

  it('leaves a read with a body to the controller', () => {
    expect(route.accepts(request('GET', '/s3/tfstate/k', { 'content-length': '3' }))).toBe(false);
    expect(route.accepts(request('GET', '/s3/tfstate/k', { 'transfer-encoding': 'chunked' }))).toBe(
      false,
    );
    expect(route.accepts(request('GET', '/s3/tfstate/k', { 'content-length': '0' }))).toBe(true);
  });

  it('at the root of the S3 listener, reads the path as received', () => {
    expect(route.accepts(request('GET', '/tfstate', {}, true))).toBe(false);
    expect(route.accepts(request('GET', '/s3/tfstate/k', {}, true))).toBe(true); // bucket `s3`
  });
});

describe('S3WriteRoute.accepts', () => {
  const write = new S3WriteRoute(undefined as never, undefined as never, undefined as never);
  const PRESIGNED_PUT = PRESIGNED.replace('x-id=GetObject', 'x-id=PutObject');

  it.each([
    ['PUT', '/s3/tfstate/team/app.tfstate.tflock'],
    ['PUT', '/s3/tfstate/team/app.tfstate'],
    ['DELETE', '/s3/tfstate/team/app.tfstate.tflock'],
    ['DELETE', '/s3/tfstate/team/app.tfstate'],
    ['PUT', '/s3/tfstate/k?x-id=PutObject'],
    ['DELETE', '/s3/tfstate/k?x-id=DeleteObject'],
    ['PUT', `/s3/tfstate/k?${PRESIGNED_PUT}`],
  ])('takes %s %s', (method, url) => {
    expect(write.accepts(request(method, url, { 'content-length': '3' }))).toBe(method === 'PUT');
    expect(write.accepts(request(method, url))).toBe(true);
  });

  it('takes a PUT with any body: the object service reads, decodes and checks it', () => {
    const put = (headers: Record<string, string>) =>
      write.accepts(request('PUT', '/s3/tfstate/k.tflock', headers));
    expect(put({ 'transfer-encoding': 'chunked' })).toBe(true);
    expect(
      put({
        'content-encoding': 'aws-chunked',
        'x-amz-content-sha256': 'STREAMING-UNSIGNED-PAYLOAD-TRAILER',
        'x-amz-trailer': 'x-amz-checksum-crc32',
      }),
    ).toBe(true);
    expect(put({ 'content-md5': 'AAAA', 'if-none-match': '*' })).toBe(true);
  });

  it('at the root of the S3 listener, reads the path as received', () => {
    expect(write.accepts(request('PUT', '/tfstate/team/app.tfstate.tflock', {}, true))).toBe(true);
    expect(write.accepts(request('PUT', '/tfstate', {}, true))).toBe(false);
  });

  it.each([
    ['GET', '/s3/tfstate/k', 'a read (S3ReadRoute)'],
    ['HEAD', '/s3/tfstate/k', 'a read (S3ReadRoute)'],
    ['POST', '/s3/tfstate/k', 'a POST'],
    ['POST', '/s3/tfstate/k?uploads', 'a multipart start'],
    ['PUT', '/s3/tfstate/k?partNumber=1&uploadId=u', 'UploadPart'],
    ['PUT', '/s3/tfstate/k?uploadId=u', 'UploadPart'],
    ['DELETE', '/s3/tfstate/k?uploadId=u', 'AbortMultipartUpload'],
    ['PUT', '/s3/tfstate', 'CreateBucket'],
    ['PUT', '/s3/tfstate/', 'CreateBucket (empty key)'],
    ['DELETE', '/s3/tfstate', 'a bucket'],
    ['PUT', '/s3', 'the service'],
    ['PUT', '/s3//k', 'an empty bucket name'],
    ['PUT', '/s3x/tfstate/k', 'another path'],
    ['PUT', '/S3/tfstate/k', 'the prefix in another case (the router decides)'],
    ['PUT', '/v1/backend/a', 'another door'],
    ['PUT', '/s3/tfstate/k?acl', 'a sub-resource'],
    ['PUT', '/s3/tfstate/k?tagging', 'a sub-resource'],
    ['DELETE', '/s3/tfstate/k?versionId=3', 'a version'],
    ['DELETE', '/s3/tfstate?delete', 'DeleteObjects'],
    ['PUT', '/s3/tfstate/k?X-Amz-Signature=a&acl', 'a parameter after presigning'],
    ['PUT', '/s3/tfstate/k%ZZ', 'a malformed escape'],
    ['DELETE', '/s3/tfstate/%E0%A4', 'bytes that are not UTF-8'],
  ])('leaves %s %s to the controller (%s)', (method, url) => {
    expect(write.accepts(request(method, url))).toBe(false);
  });

  it('leaves a DELETE with a body to the controller', () => {
    const del = (headers: Record<string, string>) =>
      write.accepts(request('DELETE', '/s3/tfstate/k.tflock', headers));
    expect(del({ 'content-length': '3' })).toBe(false);
    expect(del({ 'transfer-encoding': 'chunked' })).toBe(false);
    expect(del({ 'content-length': '0' })).toBe(true);
  });
});

describe('BackendReadRoute.accepts', () => {
  const backend = new BackendReadRoute(undefined as never, undefined as never);
  const req = (method: string, url: string, headers: Record<string, string> = {}) =>
    ({ method, url, headers }) as unknown as IncomingMessage;

  it.each([
    ['/v1/backend/team/net'],
    ['/v1/backend/team/net?workspace=staging'],
    ['/v1/backend/a%20b'],
    ['/v1/backend/'], // refused by the controller's own check (an empty name), answered alike
  ])('takes GET %s', (url) => {
    expect(backend.accepts(req('GET', url))).toBe(true);
  });

  it.each([
    ['POST', '/v1/backend/team/net'],
    ['HEAD', '/v1/backend/team/net'],
    ['LOCK', '/v1/backend/team/net'],
    ['GET', '/v1/backend/team/net?lock'],
    ['GET', '/v1/backend/team/net?ID=1'],
    ['GET', '/v1/backend/team/net?workspace=a&lock'],
    ['GET', '/V1/Backend/team/net'],
    ['GET', '/v1/backendx/team'],
    ['GET', '/v1/units'],
    ['GET', '/v1/backend/%ZZ'],
  ])('leaves %s %s to the controller', (method, url) => {
    expect(backend.accepts(req(method, url))).toBe(false);
  });

  it('leaves a GET with a body to the controller', () => {
    expect(backend.accepts(req('GET', '/v1/backend/a', { 'content-length': '2' }))).toBe(false);
    expect(backend.accepts(req('GET', '/v1/backend/a', { 'transfer-encoding': 'chunked' }))).toBe(
      false,
    );
  });
});

describe('BackendLockRoute.accepts', () => {
  const locks = new BackendLockRoute(undefined as never, undefined as never);
  const req = (method: string, url: string) =>
    ({ method, url, headers: {} }) as unknown as IncomingMessage;

  it.each([
    ['LOCK', '/v1/backend/team/net'],
    ['UNLOCK', '/v1/backend/team/net'],
    ['LOCK', '/v1/backend/team/net?workspace=staging'],
  ])('takes %s %s', (method, url) => {
    expect(locks.accepts(req(method, url))).toBe(true);
  });

  it.each([
    ['GET', '/v1/backend/team/net'],
    ['POST', '/v1/backend/team/net?lock'],
    ['DELETE', '/v1/backend/team/net?lock'],
    ['LOCK', '/v1/backend/team/net?lock'],
    ['LOCK', '/v1/backend/team/net?ID=1'],
    ['LOCK', '/V1/BACKEND/team/net'],
    ['LOCK', '/v1/units/team/net'],
    ['UNLOCK', '/v1/backend/%E0%A4'],
  ])('leaves %s %s to the controller', (method, url) => {
    expect(locks.accepts(req(method, url))).toBe(false);
  });
});

describe('S3ListRoute.accepts', () => {
  const list = new S3ListRoute(undefined as never, undefined as never);

  it.each([
    ['/s3/tfstate?list-type=2&prefix=env%3A%2F', "Terraform's workspace listing"],
    ['/s3/tfstate?list-type=2', 'the whole bucket'],
    ['/s3/tfstate/?list-type=2&prefix=a', 'the bucket with a trailing slash'],
    ['/s3/tfstate?delimiter=%2F&list-type=2&max-keys=1&start-after=a', 'paging'],
    ['/s3/tfstate?continuation-token=abc&encoding-type=url&fetch-owner=true&list-type=2', 'more'],
    ['/s3/tfstate?list-type=2&x-id=ListObjectsV2', "the SDK's x-id"],
  ])('takes GET %s (%s)', (url) => {
    expect(list.accepts(request('GET', url))).toBe(true);
    expect(list.operation()).toBe(s3Operation('GET', url));
  });

  it('at the root of the S3 listener, reads the path as received', () => {
    expect(list.accepts(request('GET', '/tfstate?list-type=2', {}, true))).toBe(true);
    expect(list.accepts(request('GET', '/tfstate/k?list-type=2', {}, true))).toBe(false);
  });

  it.each([
    ['GET', '/s3/tfstate', 'ListObjects (v1)'],
    ['GET', '/s3/tfstate?prefix=a', 'ListObjects (v1)'],
    ['GET', '/s3/tfstate?list-type=1', 'another list-type'],
    ['GET', '/s3/tfstate?list-type=%32', 'list-type=2 percent-encoded'],
    ['GET', '/s3/tfstate?list-type=2&list-type=2', 'list-type twice'],
    ['GET', '/s3/tfstate?list-type', 'list-type without a value'],
    ['GET', '/s3/tfstate?list-type=2&uploads', 'ListMultipartUploads'],
    ['GET', '/s3/tfstate?list-type=2&location', 'a bucket query'],
    ['GET', '/s3/tfstate?list-type=2&acl', 'a sub-resource'],
    ['GET', '/s3/tfstate?list-type=2&statehouse-parity=1', 'a parameter it does not know'],
    ['GET', '/s3/tfstate/k?list-type=2', 'an object'],
    ['GET', '/s3/tfstate//?list-type=2', 'an empty key'],
    ['GET', '/s3?list-type=2', 'the service'],
    ['GET', '/s3/?list-type=2', 'the service'],
    ['GET', '/s3//?list-type=2', 'an empty bucket name'],
    ['GET', '/s3/t%ZZ?list-type=2', 'a bucket that does not decode'],
    ['GET', '/S3/tfstate?list-type=2', 'the prefix in another case (the router decides)'],
    ['HEAD', '/s3/tfstate?list-type=2', 'HeadBucket'],
    ['PUT', '/s3/tfstate?list-type=2', 'a PUT'],
    ['DELETE', '/s3/tfstate?list-type=2', 'a DELETE'],
  ])('leaves %s %s to the controller (%s)', (method, url) => {
    expect(list.accepts(request(method, url))).toBe(false);
  });

  it('leaves a listing with a body to the controller', () => {
    expect(list.accepts(request('GET', '/s3/tfstate?list-type=2', { 'content-length': '1' }))).toBe(
      false,
    );
    expect(
      list.accepts(request('GET', '/s3/tfstate?list-type=2', { 'transfer-encoding': 'chunked' })),
    ).toBe(false);
  });
});
