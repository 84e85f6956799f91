import { createServer, IncomingMessage, request } from 'node:http';
import { AddressInfo } from 'node:net';
import { pinoHttp, Options } from 'pino-http';
import { loadConfig, LogLevel } from '../../src/config/config';
import { loggerParams, redactUrl } from '../../src/logging/logging';

describe('redactUrl', () => {
  it('leaves a URL without a query alone', () => {
    expect(redactUrl('/v1/backend/team/app')).toBe('/v1/backend/team/app');
    expect(redactUrl(undefined)).toBeUndefined();
  });

  it('redacts the presigned-URL credentials and keeps the other parameters', () => {
    const url =
      '/s3/tfstate/team/app/terraform.tfstate?X-Amz-Algorithm=AWS4-HMAC-SHA256' +
      '&X-Amz-Credential=AKIAEXAMPLE%2F20250101%2Fus-east-1%2Fs3%2Faws4_request' +
      '&X-Amz-Date=20250101T000000Z&X-Amz-Expires=900&X-Amz-SignedHeaders=host' +
      '&X-Amz-Security-Token=FQoGZXIvYXdzSESSIONTOKEN' +
      '&X-Amz-Signature=0123456789abcdef0123456789abcdef&versionId=3';
    expect(redactUrl(url)).toBe(
      '/s3/tfstate/team/app/terraform.tfstate?X-Amz-Algorithm=AWS4-HMAC-SHA256' +
        '&X-Amz-Credential=[redacted]' +
        '&X-Amz-Date=20250101T000000Z&X-Amz-Expires=900&X-Amz-SignedHeaders=host' +
        '&X-Amz-Security-Token=[redacted]' +
        '&X-Amz-Signature=[redacted]&versionId=3',
    );
  });

  it.each(['x-amz-signature', 'X-AMZ-SIGNATURE', 'X-Amz-SIGNATURE', 'x-Amz-Credential'])(
    'redacts %s in any case',
    (name) => {
      expect(redactUrl(`/s3/b/k?${name}=s3cr3t&a=1`)).toBe(`/s3/b/k?${name}=[redacted]&a=1`);
    },
  );

  it.each(['capability', 'code', 'state'])(
    'redacts %s (the TFE upload capability, terraform login’s code and sign-in state)',
    (name) => {
      expect(redactUrl(`/api/v2/x?${name}=s3cr3t&id=1`)).toBe(`/api/v2/x?${name}=[redacted]&id=1`);
    },
  );

  it.each(['X%2DAmz%2DSignature', 'x%2damz%2dsecurity%2dtoken', '%58-Amz-Credential'])(
    'redacts the percent-encoded name %s, keeping the name as sent',
    (name) => {
      expect(redactUrl(`/s3/b/k?${name}=s3cr3t`)).toBe(`/s3/b/k?${name}=[redacted]`);
    },
  );

  it('redacts the whole value, even when it holds "="', () => {
    expect(redactUrl('/x?X-Amz-Signature=abc=def==')).toBe('/x?X-Amz-Signature=[redacted]');
  });

  it('redacts token-like parameters of the login endpoints', () => {
    expect(redactUrl('/v1/auth/callback?code=authcode&state=xyz&access_token=tok')).toBe(
      '/v1/auth/callback?code=[redacted]&state=[redacted]&access_token=[redacted]',
    );
  });

  it('keeps parameters that only resemble credentials, and the lock ID', () => {
    const url = '/v1/backend/team/app?ID=lock-1&X-Amz-SignedHeaders=host&signatures=1&lock';
    expect(redactUrl(url)).toBe(url);
  });

  it('keeps a parameter whose name is malformed percent-encoding', () => {
    expect(redactUrl('/x?%E0%A4%A=1&X-Amz-Signature=s')).toBe(
      '/x?%E0%A4%A=1&X-Amz-Signature=[redacted]',
    );
  });
});

describe('loggerParams with a real pino-http logger', () => {
  const REQUEST_ID = 'req-3b9d2f7e-log-test';
  const BASIC_PASSWORD = 'basic-password-token-value-0001';
  const BASIC = Buffer.from(`terraform:${BASIC_PASSWORD}`).toString('base64');
  const COOKIE_VALUE = 'session-cookie-secret-0002';
  const SIGNATURE = 'f00dfacef00dfacef00dfacef00dface0003';
  const CREDENTIAL = 'ASIAEXAMPLECREDENTIAL0004';
  const SESSION_TOKEN = 'session-token-header-value-0005';
  const QUERY_TOKEN = 'security-token-query-value-0006';
  const SECRETS = [
    BASIC,
    BASIC_PASSWORD,
    COOKIE_VALUE,
    SIGNATURE,
    CREDENTIAL,
    SESSION_TOKEN,
    QUERY_TOKEN,
  ];
  const PRESIGNED_PATH =
    `/s3/tfstate/team/app/terraform.tfstate?X-Amz-Algorithm=AWS4-HMAC-SHA256` +
    `&X-Amz-Credential=${CREDENTIAL}%2F20250101%2Fus-east-1%2Fs3%2Faws4_request` +
    `&X-Amz-Security-Token=${QUERY_TOKEN}&X-Amz-Signature=${SIGNATURE}&versionId=3`;

  /**
   * Serves one request through the pino-http middleware built from `loggerParams`, with the
   * request id set first as the app's own middleware does, and returns every log line written.
   */
  async function logOneRequest(options: {
    method: string;
    path: string;
    status: number;
    logLevel?: LogLevel;
    logInHandler?: boolean;
  }): Promise<string[]> {
    const lines: string[] = [];
    const config = { ...loadConfig({}), logLevel: options.logLevel ?? 'info' };
    const pinoOptions = loggerParams(config).pinoHttp as Options;
    const middleware = pinoHttp({ ...pinoOptions }, { write: (line: string) => lines.push(line) });
    let finished!: () => void;
    const responseLogged = new Promise<void>((done) => (finished = done));
    const server = createServer((req, res) => {
      (req as IncomingMessage & { id?: string }).id = REQUEST_ID;
      req.resume();
      middleware(req, res);
      // pino-http's own listener was added first, so it has logged by the time this runs.
      res.on('finish', () => setImmediate(finished));
      if (options.logInHandler) req.log.info('handling the request');
      res.statusCode = options.status;
      res.setHeader('Set-Cookie', `session=${COOKIE_VALUE}; HttpOnly`);
      res.end('done');
    });
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    try {
      await sendRequest(server.address() as AddressInfo, options.method, options.path);
      await responseLogged;
    } finally {
      await new Promise<void>((done) => server.close(() => done()));
    }
    return lines;
  }

  function sendRequest({ port }: AddressInfo, method: string, path: string): Promise<void> {
    return new Promise<void>((done, fail) => {
      const req = request(
        {
          host: '127.0.0.1',
          port,
          agent: false, // no keep-alive socket may outlive the test
          method,
          path,
          headers: {
            Authorization: `Basic ${BASIC}`,
            Cookie: `session=${COOKIE_VALUE}; theme=dark`,
            'X-Amz-Security-Token': SESSION_TOKEN,
            'User-Agent': 'Terraform/1.11.0',
          },
        },
        (res) => {
          res.resume();
          res.on('end', done);
        },
      );
      req.on('error', fail);
      // A body only where HTTP gives one meaning (Node 24 holds a GET whose body is unread).
      req.end(method === 'PUT' || method === 'POST' ? '{"serial":1}' : undefined);
    });
  }

  const expectNoSecrets = (lines: string[]): void => {
    const all = lines.join('');
    for (const secret of SECRETS) expect(all).not.toContain(secret);
  };

  it('logs the completed request without any credential', async () => {
    const lines = await logOneRequest({ method: 'PUT', path: PRESIGNED_PATH, status: 201 });
    expect(lines).toHaveLength(1);
    expectNoSecrets(lines);
  });

  it('logs the method, status, request id and redacted URL of the request', async () => {
    const lines = await logOneRequest({ method: 'PUT', path: PRESIGNED_PATH, status: 201 });
    const entry = JSON.parse(lines[0]);
    expect(entry.req.method).toBe('PUT');
    expect(entry.req.id).toBe(REQUEST_ID);
    expect(entry.res.statusCode).toBe(201);
    expect(entry.service).toBe('statehouse');
    expect(entry.req.url).toContain('/s3/tfstate/team/app/terraform.tfstate?');
    expect(entry.req.url).toContain('X-Amz-Signature=[redacted]');
    expect(entry.req.url).toContain('versionId=3');
    expect(entry.req.userAgent).toBe('Terraform/1.11.0');
  });

  it('logs no request headers and no response headers at all', async () => {
    const lines = await logOneRequest({ method: 'GET', path: PRESIGNED_PATH, status: 200 });
    const entry = JSON.parse(lines[0]);
    expect(entry.req.headers).toBeUndefined();
    expect(entry.res.headers).toBeUndefined();
    expect(lines[0]).not.toMatch(/authorization|cookie/i);
  });

  it('keeps credentials out of lines logged while handling the request', async () => {
    const lines = await logOneRequest({
      method: 'POST',
      path: PRESIGNED_PATH,
      status: 200,
      logInHandler: true,
    });
    expect(lines).toHaveLength(2);
    expectNoSecrets(lines);
    const handling = JSON.parse(lines[0]);
    expect(handling.msg).toBe('handling the request');
    expect(handling.req.id).toBe(REQUEST_ID);
  });

  it('keeps credentials out of the error line of a failed request', async () => {
    const lines = await logOneRequest({ method: 'DELETE', path: PRESIGNED_PATH, status: 500 });
    expect(lines).toHaveLength(1);
    expectNoSecrets(lines);
    const entry = JSON.parse(lines[0]);
    expect(entry.err.message).toMatch(/500/);
    expect(entry.req.method).toBe('DELETE');
    expect(entry.req.id).toBe(REQUEST_ID);
    expect(entry.res.statusCode).toBe(500);
  });

  it('does not log health and readiness probes', async () => {
    expect(await logOneRequest({ method: 'GET', path: '/healthz', status: 200 })).toEqual([]);
    expect(await logOneRequest({ method: 'GET', path: '/readyz', status: 200 })).toEqual([]);
  });

  it('follows the configured log level', async () => {
    expect(
      await logOneRequest({ method: 'GET', path: '/v1/units', status: 200, logLevel: 'warn' }),
    ).toEqual([]);
    expect(
      await logOneRequest({ method: 'GET', path: '/v1/units', status: 200, logLevel: 'debug' }),
    ).toHaveLength(1);
  });

  it('leaves out the config of a logged client error (it may carry request headers)', () => {
    const lines: string[] = [];
    const pinoOptions = loggerParams(loadConfig({})).pinoHttp as Options;
    const { logger } = pinoHttp({ ...pinoOptions }, { write: (line: string) => lines.push(line) });
    const err = Object.assign(new Error('request to the object store failed'), {
      config: { headers: { Authorization: `Bearer ${SESSION_TOKEN}` } },
    });
    logger.error({ err }, 'blob store call failed');
    expect(lines).toHaveLength(1);
    expect(lines[0]).not.toContain(SESSION_TOKEN);
    expect(JSON.parse(lines[0]).err.config).toBeUndefined();
    expect(lines[0]).toContain('request to the object store failed');
  });
});
