import { ConfigError, loadConfig } from '../../src/config/config';
import { corsAnswer, CorsRequest } from '../../src/common/cors';

function problems(value: string): string[] {
  try {
    loadConfig({ STATEHOUSE_CORS_ORIGINS: value });
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as ConfigError).problems;
  }
  throw new Error(`expected STATEHOUSE_CORS_ORIGINS=${value} to be refused`);
}

describe('STATEHOUSE_CORS_ORIGINS', () => {
  it('is empty by default: CORS off', () => {
    expect(loadConfig({}).corsOrigins).toEqual([]);
    expect(loadConfig({ STATEHOUSE_CORS_ORIGINS: ' , ' }).corsOrigins).toEqual([]);
  });

  it('keeps each origin as a browser sends it: lower-case, no default port, no trailing slash, once', () => {
    const config = loadConfig({
      STATEHOUSE_CORS_ORIGINS:
        ' HTTPS://Console.Example.COM:443/ ,http://localhost:3000, https://console.example.com,http://[::1]:8081',
    });
    expect(config.corsOrigins).toEqual([
      'https://console.example.com',
      'http://localhost:3000',
      'http://[::1]:8081',
    ]);
    expect(config.warnings).toEqual([]);
  });

  it.each([
    ['*', 'wildcards are not allowed'],
    ['https://*.example.com', 'wildcards are not allowed'],
    ['null', 'opaque origin'],
    ['console.example.com', 'must be an origin like https://console.example.com'],
    ['ftp://console.example.com', 'only http and https'],
    ['https://console.example.com/app', 'no path'],
    ['https://console.example.com?x=1', 'no user, query or fragment'],
    ['https://console.example.com#top', 'no user, query or fragment'],
    ['https://user:pw@console.example.com', 'no user, query or fragment'],
  ])('refuses %s at start, naming the variable and the entry', (entry, why) => {
    const found = problems(`https://ok.example.com,${entry}`);
    expect(found).toHaveLength(1);
    expect(found[0]).toContain('STATEHOUSE_CORS_ORIGINS');
    expect(found[0]).toContain(`"${entry}"`);
    expect(found[0]).toContain(why);
  });

  it('names every bad entry at once', () => {
    expect(problems('*,null,https://a.example.com/x')).toHaveLength(3);
  });
});

describe('corsAnswer', () => {
  const allowed = new Set(['https://console.example.com']);
  const get = (origin?: string): CorsRequest => ({
    method: 'GET',
    origin,
    requestMethod: undefined,
  });
  const preflight = (origin: string): CorsRequest => ({
    method: 'OPTIONS',
    origin,
    requestMethod: 'PUT',
  });

  it('adds nothing at all when no origin is configured (CORS off), not even to a preflight', () => {
    for (const req of [get(), get('https://console.example.com'), preflight('https://x.example')])
      expect(corsAnswer(new Set(), req)).toEqual({ kind: 'continue', headers: {} });
  });

  it('echoes an allowed origin on an ordinary request, with Vary: Origin and no credentials', () => {
    const a = corsAnswer(allowed, get('https://console.example.com'));
    expect(a).toEqual({
      kind: 'continue',
      headers: {
        Vary: 'Origin',
        'Access-Control-Allow-Origin': 'https://console.example.com',
        'Access-Control-Expose-Headers': 'X-Request-Id, Retry-After, WWW-Authenticate',
      },
    });
  });

  it('answers a preflight from an allowed origin itself', () => {
    const a = corsAnswer(allowed, preflight('https://console.example.com'));
    expect(a.kind).toBe('preflight');
    expect(a.headers['Access-Control-Allow-Origin']).toBe('https://console.example.com');
    expect(a.headers['Access-Control-Allow-Methods']).toContain('PUT');
    expect(a.headers['Access-Control-Allow-Headers']).toContain('Authorization');
    expect(Object.keys(a.headers)).not.toContain('Access-Control-Allow-Credentials');
  });

  it('refuses a preflight from any other origin (compared exactly) with no Allow-* header', () => {
    for (const origin of [
      'https://console.example.com.evil.example',
      'http://console.example.com',
      'https://Console.example.com',
      'https://console.example.com:8443',
      'null',
    ]) {
      const a = corsAnswer(allowed, preflight(origin));
      expect(a).toEqual({
        kind: 'refused',
        origin,
        headers: { Vary: 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers' },
      });
    }
  });

  it('lets an ordinary request from another origin through without Allow-* headers (the browser keeps the answer from the page)', () => {
    expect(corsAnswer(allowed, get('https://elsewhere.example'))).toEqual({
      kind: 'continue',
      headers: { Vary: 'Origin' },
    });
    expect(corsAnswer(allowed, get())).toEqual({ kind: 'continue', headers: { Vary: 'Origin' } });
  });

  it('an OPTIONS without Access-Control-Request-Method is no preflight: it goes to the router', () => {
    const a = corsAnswer(allowed, {
      method: 'OPTIONS',
      origin: 'https://console.example.com',
      requestMethod: undefined,
    });
    expect(a.kind).toBe('continue');
  });
});
