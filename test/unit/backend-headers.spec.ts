import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';

/** How many times any middleware helmet made has run. */
const runs = { count: 0 };
jest.mock('helmet', () => {
  const actual = jest.requireActual<typeof import('helmet')>('helmet').default;
  const counted = (...args: Parameters<typeof actual>) => {
    const middleware = actual(...args);
    return (...mw: Parameters<typeof middleware>) => {
      runs.count++;
      return middleware(...mw);
    };
  };
  return { __esModule: true, default: counted };
});

import helmet from 'helmet';
import { setBackendHeaders } from '../../src/http-hygiene';

function answer(): { req: IncomingMessage; res: ServerResponse } {
  const req = new IncomingMessage(new Socket());
  return { req, res: new ServerResponse(req) };
}

describe("the HTTP backend's lean answers: helmet's headers", () => {
  it('are recorded once and replayed, not made by running helmet for every request', () => {
    const before = runs.count;
    for (let i = 0; i < 3; i++) {
      const { req, res } = answer();
      res.setHeader('X-Powered-By', 'Express');
      setBackendHeaders(req, res);
      expect(res.getHeader('x-powered-by')).toBeUndefined();
      expect(res.getHeader('x-content-type-options')).toBe('nosniff');
    }
    expect(runs.count).toBe(before);
  });

  it("are exactly the JSON API's helmet headers", () => {
    const options = {
      strictTransportSecurity: { maxAge: 365 * 24 * 3600, includeSubDomains: false },
      xFrameOptions: { action: 'deny' as const },
      referrerPolicy: { policy: 'no-referrer' as const },
      contentSecurityPolicy: {
        useDefaults: false,
        directives: {
          defaultSrc: ["'none'"],
          baseUri: ["'none'"],
          formAction: ["'none'"],
          frameAncestors: ["'none'"],
        },
      },
    };
    const direct = answer();
    helmet(options)(direct.req, direct.res, () => undefined);
    const replayed = answer();
    setBackendHeaders(replayed.req, replayed.res);
    expect(replayed.res.getHeaders()).toEqual(direct.res.getHeaders());
    expect(Object.keys(replayed.res.getHeaders()).length).toBeGreaterThan(8);
  });
});
