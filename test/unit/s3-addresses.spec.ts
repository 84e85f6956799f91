import { resolveRemoteState, s3EndpointsOf, SelfAddresses } from '../../src/graph/remote-config';
import { parseTarget, virtualHostedBucket } from '../../src/s3compat/s3-request';
import type { RemoteStateSource } from '../../src/state/state-inspector';

/**
 * The S3 door's two bases — `/s3` on the main listener, the root of STATEHOUSE_S3_PORT's — as
 * the door reads its requests and as the graph recognises consumers' `terraform_remote_state`
 * configs pointing at this server.
 */

const s3Source = (endpoint: string, key = 'platform/network/terraform.tfstate') =>
  ({
    name: 'network',
    backend: 's3',
    config: { bucket: 'tfstate', key, region: 'us-east-1', endpoints: { s3: endpoint } },
    workspace: undefined,
  }) as unknown as RemoteStateSource;

const SELF: SelfAddresses = {
  bases: ['https://statehouse.example.com', 'http://127.0.0.1:8080'],
  s3Port: 9000,
  buckets: ['tfstate'],
  workspacePrefixes: ['env:'],
};

describe('S3 endpoints of this server', () => {
  it('are each base with /s3, and with an S3 port the root of that port at each base host', () => {
    expect(s3EndpointsOf(SELF.bases, 9000)).toEqual([
      'https://statehouse.example.com/s3',
      'http://127.0.0.1:8080/s3',
      'https://statehouse.example.com:9000',
      'http://127.0.0.1:9000',
    ]);
    expect(s3EndpointsOf(SELF.bases, undefined)).toEqual([
      'https://statehouse.example.com/s3',
      'http://127.0.0.1:8080/s3',
    ]);
    expect(s3EndpointsOf(['http://[::1]:8080/base/'], 9000)).toEqual([
      'http://[::1]:8080/base/s3',
      'http://[::1]:9000',
    ]);
  });

  it('a remote state at the S3 port (no /s3) is a state here; /s3 at the S3 port is not', () => {
    const network = { unit: 'platform/network', workspace: 'default' };
    expect(resolveRemoteState(s3Source('http://127.0.0.1:9000'), SELF)).toEqual(network);
    expect(resolveRemoteState(s3Source('http://127.0.0.1:9000/'), SELF)).toEqual(network);
    expect(resolveRemoteState(s3Source('https://statehouse.example.com:9000'), SELF)).toEqual(
      network,
    );
    expect(resolveRemoteState(s3Source('http://127.0.0.1:8080/s3'), SELF)).toEqual(network);
    // On the S3 listener `/s3` would be a bucket named s3; the main port has no S3 door at its root.
    expect(resolveRemoteState(s3Source('http://127.0.0.1:9000/s3'), SELF)).toBeUndefined();
    expect(resolveRemoteState(s3Source('http://127.0.0.1:8080'), SELF)).toBeUndefined();
    // Without an S3 listener, its port is nobody's.
    expect(
      resolveRemoteState(s3Source('http://127.0.0.1:9000'), { ...SELF, s3Port: undefined }),
    ).toBeUndefined();
  });
});

describe('reading a request target under either base', () => {
  it('below /s3 on the main listener, and at the root of the S3 listener, the same target', () => {
    const main = parseTarget('/s3/tfstate/env%3A/dev/team/app/terraform.tfstate?uploads', '/s3');
    const root = parseTarget('/tfstate/env%3A/dev/team/app/terraform.tfstate?uploads', '');
    for (const t of [main, root]) {
      expect(t.bucket).toBe('tfstate');
      expect(t.key).toBe('env:/dev/team/app/terraform.tfstate');
      expect(t.query.has('uploads')).toBe(true);
    }
    // What SigV4 checks is the path exactly as received, base included.
    expect(main.rawPath).toBe('/s3/tfstate/env%3A/dev/team/app/terraform.tfstate');
    expect(root.rawPath).toBe('/tfstate/env%3A/dev/team/app/terraform.tfstate');
  });

  it('the service, a bucket, a bucket with a trailing slash (s3cmd: /tfstate/?location)', () => {
    const at = (url: string) => {
      const t = parseTarget(url, '');
      return { bucket: t.bucket, key: t.key, rawPath: t.rawPath };
    };
    expect(at('/')).toEqual({ bucket: undefined, key: undefined, rawPath: '/' });
    expect(at('/?x-id=ListBuckets')).toEqual({ bucket: undefined, key: undefined, rawPath: '/' });
    expect(at('/tfstate')).toEqual({ bucket: 'tfstate', key: undefined, rawPath: '/tfstate' });
    expect(at('/tfstate/?location')).toEqual({
      bucket: 'tfstate',
      key: undefined,
      rawPath: '/tfstate/',
    });
    const location = parseTarget('/tfstate/?location', '');
    expect(location.query.has('location')).toBe(true);
  });
});

describe('virtual-hosted-style requests are recognised (and refused by the door)', () => {
  const buckets = ['tfstate', 'my.states'];
  const self = ['statehouse.example.com', 'localhost', '127.0.0.1'];

  it('a configured bucket as a subdomain of this server: an IP, localhost or a base host', () => {
    expect(virtualHostedBucket('tfstate.127.0.0.1:9000', buckets, self)).toBe('tfstate');
    expect(virtualHostedBucket('tfstate.10.1.2.3', buckets, self)).toBe('tfstate');
    expect(virtualHostedBucket('TFSTATE.localhost:9000', buckets, self)).toBe('tfstate');
    expect(virtualHostedBucket('tfstate.statehouse.example.com', buckets, self)).toBe('tfstate');
    expect(virtualHostedBucket('my.states.statehouse.example.com:443', buckets, self)).toBe(
      'my.states',
    );
  });

  it('path-style hosts, and a server whose own name starts like a bucket, are not', () => {
    expect(virtualHostedBucket(undefined, buckets, self)).toBeUndefined();
    expect(virtualHostedBucket('127.0.0.1:9000', buckets, self)).toBeUndefined();
    expect(virtualHostedBucket('statehouse.example.com', buckets, self)).toBeUndefined();
    expect(virtualHostedBucket('tfstate.example.com', buckets, self)).toBeUndefined();
    expect(virtualHostedBucket('other.127.0.0.1:9000', buckets, self)).toBeUndefined();
    expect(virtualHostedBucket('[::1]:9000', buckets, self)).toBeUndefined();
  });
});
