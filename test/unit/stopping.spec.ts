/**
 * What a request gets when it arrives after the stop began (src/health/stopping.ts): 503 with
 * `Retry-After` and `Connection: close`, in its door's format — S3 XML `ServiceUnavailable` for
 * the S3 door (below `/s3`, where the S3 listener hands its requests on), JSON elsewhere. The
 * e2e suite (test/e2e/shutdown.spec.ts) sends them over real sockets.
 */
import { refusalWhileStopping, StopState } from '../../src/health/stopping';

describe('refusals while stopping', () => {
  it('the S3 door answers S3 XML ServiceUnavailable, naming the resource without its query', () => {
    const r = refusalWhileStopping('/s3/tfstate/team/app/terraform.tfstate?x-id=PutObject', 'r-1');
    expect(r.status).toBe(503);
    expect(r.headers).toEqual({
      'Retry-After': '2',
      Connection: 'close',
      'Content-Type': 'application/xml',
      'x-amz-request-id': 'r-1',
    });
    expect(r.body).toBe(
      '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>ServiceUnavailable</Code>' +
        '<Message>the server is stopping; try again (another replica answers)</Message>' +
        '<Resource>/s3/tfstate/team/app/terraform.tfstate</Resource><RequestId>r-1</RequestId></Error>',
    );
    expect(refusalWhileStopping('/S3?list-type=2', 'r').headers['Content-Type']).toBe(
      'application/xml',
    );
  });

  it('every other door answers JSON with the code `unavailable`', () => {
    for (const url of ['/v1/backend/team/app', '/v1/units', '/api/v2/ping', '/s3x/tfstate']) {
      const r = refusalWhileStopping(url, 'r-2');
      expect(r.status).toBe(503);
      expect(r.headers).toEqual({
        'Retry-After': '2',
        Connection: 'close',
        'Content-Type': 'application/json; charset=utf-8',
      });
      expect(JSON.parse(r.body)).toEqual({
        statusCode: 503,
        error: 'Service Unavailable',
        code: 'unavailable',
        message: 'the server is stopping; try again (another replica answers)',
        requestId: 'r-2',
      });
    }
  });

  it('the stop state is set once, by the first signal', () => {
    const state = new StopState();
    expect(state.stopping).toBe(false);
    state.begin('SIGTERM');
    state.begin('SIGINT');
    expect({ stopping: state.stopping, reason: state.reason }).toEqual({
      stopping: true,
      reason: 'SIGTERM',
    });
  });
});
