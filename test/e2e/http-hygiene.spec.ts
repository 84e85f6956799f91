/**
 * HTTP hygiene against the real `statehouse serve` process: security headers on the management
 * API, the HTTP backend and Swagger UI (with a policy under which Swagger UI works, proven in
 * headless Chromium), none on the S3 door on either listener (it answers like S3); CORS off
 * unless STATEHOUSE_CORS_ORIGINS lists origins, and then only for them; no answer on any door —
 * errors, unknown routes, Swagger UI's files — naming a version of the server or what it runs on.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { IncomingHttpHeaders } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { freshServerEnv } from '../support/database';
import { ROOT } from '../support/paths';
import { RawReply, S3Creds, sendRaw, signS3 } from '../support/s3-signer';
import { NODE, RunningServer, spawnServer } from '../support/server';

jest.setTimeout(120_000);

/** Debian's Chromium (`apt-get install chromium`; `CI=true .ci/run` installs it when missing). */
const CHROMIUM = '/usr/bin/chromium';
const CONSOLE = 'https://console.example.com';
const DEV_CONSOLE = 'http://localhost:3000';
const ELSEWHERE = 'https://elsewhere.example.net';

const JSON_CSP = "default-src 'none';base-uri 'none';form-action 'none';frame-ancestors 'none'";
const DOCS_CSP =
  "default-src 'none';script-src 'self';style-src 'self' 'unsafe-inline';img-src 'self' data:;" +
  "font-src 'self' data:;connect-src 'self';base-uri 'none';form-action 'none';frame-ancestors 'none'";

/** The headers every answer outside the S3 door carries, besides its Content-Security-Policy. */
const HARDENING: Record<string, string> = {
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'strict-transport-security': 'max-age=31536000',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'x-permitted-cross-domain-policies': 'none',
};

let withCors: RunningServer;
let withoutCors: RunningServer;
let cleanups: (() => Promise<void>)[] = [];
let creds: S3Creds;

beforeAll(async () => {
  const [a, b] = await Promise.all([freshServerEnv(), freshServerEnv()]);
  cleanups = [a.cleanup, b.cleanup];
  [withCors, withoutCors] = await Promise.all([
    spawnServer({
      ...a.env,
      STATEHOUSE_S3_PORT: '0',
      // Spelt as people write them: the browser's Origin is lower-case, without a default port.
      STATEHOUSE_CORS_ORIGINS: ` HTTPS://Console.Example.com:443/ , ${DEV_CONSOLE}`,
    }),
    spawnServer(b.env),
  ]);
  const token = await fetch(`${withCors.url}/v1/auth/tokens`, {
    method: 'POST',
    headers: { ...withCors.auth, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'hygiene', subject: 'svc:hygiene' }),
  });
  expect(token.status).toBe(201);
  const secret = ((await token.json()) as { token: string }).token;
  const issued = await fetch(`${withCors.url}/v1/auth/issue-s3-creds`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${secret}` },
  });
  expect(issued.status).toBe(200);
  creds = (await issued.json()) as S3Creds;
});

afterAll(async () => {
  await Promise.all([withCors?.stop(), withoutCors?.stop()]);
  for (const c of cleanups) await c();
});

/** A request sent exactly as written (the target is not normalised). */
function send(
  port: number,
  method: string,
  target: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<RawReply> {
  return sendRaw(port, {
    method,
    target,
    headers: { host: `127.0.0.1:${port}`, ...headers },
    body: body === undefined ? undefined : Buffer.from(body),
  });
}

const auth = (): Record<string, string> => withCors.auth;
const headersNamed = (h: IncomingHttpHeaders, prefix: string): string[] =>
  Object.keys(h).filter((k) => k.startsWith(prefix));

function expectHardened(r: RawReply, csp: string, what: string): void {
  const got = Object.fromEntries(
    ['content-security-policy', ...Object.keys(HARDENING)].map((k) => [k, r.headers[k]]),
  );
  expect({ what, ...got }).toEqual({ what, 'content-security-policy': csp, ...HARDENING });
}

describe('security headers', () => {
  it('the management API, its errors and unknown routes carry the strict headers: nothing in a JSON answer may load or run', async () => {
    const p = withCors.port;
    const answers: [string, RawReply][] = [
      ['healthz', await send(p, 'GET', '/healthz')],
      ['401', await send(p, 'GET', '/v1/units')],
      ['200', await send(p, 'GET', '/v1/units', auth())],
      ['unknown route', await send(p, 'GET', '/v1/nothing-here')],
      ['other spelling', await send(p, 'GET', '/V1/Units/', auth())],
      ['malformed path', await send(p, 'GET', '/v1/units/%ZZ', auth())],
      [
        'bad JSON',
        await send(p, 'POST', '/v1/units', { ...auth(), 'content-type': 'application/json' }, '{'),
      ],
      ['jwks', await send(p, 'GET', '/.well-known/jwks.json')],
      ['metrics', await send(p, 'GET', '/metrics')],
      ['yaml spec', await send(p, 'GET', '/docs-yaml')],
    ];
    expect(answers.map(([what, r]) => [what, r.status])).toEqual([
      ['healthz', 200],
      ['401', 401],
      ['200', 200],
      ['unknown route', 400],
      ['other spelling', 200],
      ['malformed path', 400],
      ['bad JSON', 400],
      ['jwks', 200],
      ['metrics', 200],
      ['yaml spec', 200],
    ]);
    for (const [what, r] of answers) expectHardened(r, JSON_CSP, what);
  });

  it('the HTTP backend carries the same headers (Terraform ignores them; a state opened in a browser is never sniffed or rendered)', async () => {
    const p = withCors.port;
    const state = JSON.stringify({ version: 4, serial: 1, lineage: 'l-hyg', resources: [] });
    const answers: [string, RawReply][] = [
      ['401', await send(p, 'GET', '/v1/backend/hyg/app')],
      ['POST', await send(p, 'POST', '/v1/backend/hyg/app', auth(), state)],
      ['GET', await send(p, 'GET', '/v1/backend/hyg/app', auth())],
      ['LOCK', await send(p, 'LOCK', '/v1/backend/hyg/app', auth(), '{"ID":"x"}')],
      ['UNLOCK', await send(p, 'UNLOCK', '/v1/backend/hyg/app', auth(), '{"ID":"x"}')],
      ['malformed', await send(p, 'GET', '/v1/backend/hyg/%E0%A4', auth())],
    ];
    expect(answers.map(([what, r]) => [what, r.status])).toEqual([
      ['401', 401],
      ['POST', 200],
      ['GET', 200],
      ['LOCK', 200],
      ['UNLOCK', 200],
      ['malformed', 400],
    ]);
    for (const [what, r] of answers) expectHardened(r, JSON_CSP, what);
  });

  it("Swagger UI's page and files carry a policy Swagger UI works under: scripts from this server only, never inline", async () => {
    const p = withCors.port;
    for (const path of [
      '/docs',
      '/docs/',
      '/DOCS',
      '/docs/swagger-ui-init.js',
      '/docs/swagger-ui-bundle.js',
      '/docs/swagger-ui.css',
      '/docs/openapi.json',
    ]) {
      const r = await send(p, 'GET', path);
      expect({ path, status: r.status }).toEqual({ path, status: 200 });
      expectHardened(r, DOCS_CSP, path);
    }
    expect(DOCS_CSP).not.toMatch(/script-src[^;]*unsafe/);
    expect(DOCS_CSP).not.toContain('upgrade-insecure-requests');
  });

  it("Swagger UI's folder serves only what the page loads: package.json, the README, source maps and the stock demo page answer unknown_route", async () => {
    const p = withCors.port;
    for (const path of [
      '/docs/package.json',
      '/docs/package%2ejson',
      '/docs/README.md',
      '/docs/NOTICE',
      '/docs/swagger-ui-bundle.js.map',
      '/docs/swagger-initializer.js',
      '/docs/index.css',
      '/docs/oauth2-redirect.html',
      '/docs/log.bundle-sizes.swagger-ui.txt',
    ]) {
      const r = await send(p, 'GET', path);
      expect({
        path,
        status: r.status,
        code: (JSON.parse(r.text) as { code: string }).code,
      }).toEqual({ path, status: 400, code: 'unknown_route' });
      expectHardened(r, DOCS_CSP, path);
    }
  });

  it('the S3 door answers like S3 on both listeners: none of these headers, no CORS', async () => {
    const main = withCors.port;
    const s3Port = withCors.s3Port as number;
    const key = 'hyg/s3/terraform.tfstate';
    const state = Buffer.from(
      JSON.stringify({ version: 4, serial: 1, lineage: 'l-s3', resources: [] }),
    );
    const signed = async (port: number, base: string, method: string, body?: Buffer) =>
      sendRaw(port, await signS3(port, creds, { method, key, base, body }));
    const fromConsole = { origin: CONSOLE };
    const preflight = {
      origin: CONSOLE,
      'access-control-request-method': 'PUT',
      'access-control-request-headers': 'authorization',
    };
    const answers: [string, RawReply][] = [
      ['PutObject /s3', await signed(main, '/s3', 'PUT', state)],
      ['GetObject /s3', await signed(main, '/s3', 'GET')],
      ['GetObject root', await signed(s3Port, '', 'GET')],
      ['anonymous /s3', await send(main, 'GET', '/s3/tfstate/x', fromConsole)],
      ['anonymous /S3/', await send(main, 'GET', '/S3/', fromConsole)],
      ['malformed /s3', await send(main, 'GET', '/s3/tfstate/%ZZ')],
      ['preflight /s3', await send(main, 'OPTIONS', `/s3/tfstate/${key}`, preflight)],
      ['anonymous root', await send(s3Port, 'GET', '/tfstate/x', fromConsole)],
      ['API path on S3 port', await send(s3Port, 'GET', '/v1/units', auth())],
      ['docs on S3 port', await send(s3Port, 'GET', '/docs')],
      ['preflight root', await send(s3Port, 'OPTIONS', '/tfstate/x', preflight)],
    ];
    expect(answers.map(([what, r]) => [what, r.status])).toEqual([
      ['PutObject /s3', 200],
      ['GetObject /s3', 200],
      ['GetObject root', 200],
      ['anonymous /s3', 403],
      ['anonymous /S3/', 403],
      ['malformed /s3', 400],
      ['preflight /s3', 403],
      ['anonymous root', 403],
      ['API path on S3 port', 400],
      ['docs on S3 port', 403],
      ['preflight root', 403],
    ]);
    for (const [what, r] of answers) {
      const extra = Object.keys(r.headers).filter(
        (k) =>
          k === 'content-security-policy' ||
          k === 'vary' ||
          k in HARDENING ||
          k.startsWith('access-control-') ||
          k.startsWith('cross-origin-') ||
          k.startsWith('x-dns-') ||
          k.startsWith('x-download-') ||
          k.startsWith('x-xss-') ||
          k === 'origin-agent-cluster',
      );
      expect({ what, extra }).toEqual({ what, extra: [] });
      if (r.status >= 400)
        expect({ what, type: r.headers['content-type'] }).toEqual({
          what,
          type: expect.stringMatching(/^application\/xml/),
        });
    }
  });
});

describe('CORS', () => {
  it('off by default: no Access-Control-* header for any origin, and a preflight is not answered as one', async () => {
    const p = withoutCors.port;
    const get = await send(p, 'GET', '/v1/units', { ...withoutCors.auth, origin: CONSOLE });
    const pre = await send(p, 'OPTIONS', '/v1/units', {
      origin: CONSOLE,
      'access-control-request-method': 'GET',
      'access-control-request-headers': 'authorization',
    });
    expect(get.status).toBe(200);
    expect(pre.status).toBe(400); // no route answers OPTIONS
    for (const r of [get, pre]) {
      expect(headersNamed(r.headers, 'access-control-')).toEqual([]);
      expect(r.headers.vary).toBeUndefined();
    }
  });

  it('a listed origin may read answers: its own origin echoed, never a wildcard, never credentials', async () => {
    for (const origin of [CONSOLE, DEV_CONSOLE]) {
      const r = await send(withCors.port, 'GET', '/v1/units', { ...auth(), origin });
      expect(r.status).toBe(200);
      expect(r.headers['access-control-allow-origin']).toBe(origin);
      expect(r.headers['access-control-expose-headers']).toContain('X-Request-Id');
      expect(r.headers['access-control-allow-credentials']).toBeUndefined();
      expect(r.headers.vary).toBe('Origin');
    }
    // An error answer is readable too (the page can show why).
    const denied = await send(withCors.port, 'GET', '/v1/units', { origin: CONSOLE });
    expect(denied.status).toBe(401);
    expect(denied.headers['access-control-allow-origin']).toBe(CONSOLE);
  });

  it('a preflight from a listed origin is answered 204 without authentication, naming the methods and headers the API takes', async () => {
    const r = await send(withCors.port, 'OPTIONS', '/v1/units/team%2Fapp/state', {
      origin: CONSOLE,
      'access-control-request-method': 'PUT',
      'access-control-request-headers': 'authorization, content-type',
    });
    expect(r.status).toBe(204);
    expect(r.text).toBe('');
    expect(r.headers['access-control-allow-origin']).toBe(CONSOLE);
    expect(r.headers['access-control-allow-methods']).toBe('GET, HEAD, POST, PUT, DELETE');
    expect(r.headers['access-control-allow-headers']).toBe(
      'Authorization, Content-Type, Content-MD5, X-Request-Id',
    );
    expect(r.headers['access-control-max-age']).toBe('600');
    expect(r.headers['access-control-allow-credentials']).toBeUndefined();
    expect(r.headers.vary).toBe(
      'Origin, Access-Control-Request-Method, Access-Control-Request-Headers',
    );
    expectHardened(r, JSON_CSP, 'preflight');
  });

  it('an origin not listed gets no Access-Control-Allow-* header, and its preflight a 403 naming the setting', async () => {
    for (const origin of [
      ELSEWHERE,
      'null',
      `${CONSOLE}.evil.example`,
      'http://console.example.com',
    ]) {
      const pre = await send(withCors.port, 'OPTIONS', '/v1/units', {
        origin,
        'access-control-request-method': 'GET',
      });
      expect({ origin, status: pre.status }).toEqual({ origin, status: 403 });
      const body = JSON.parse(pre.text) as { code: string; message: string };
      expect(body.code).toBe('forbidden');
      expect(body.message).toContain('STATEHOUSE_CORS_ORIGINS');
      expect(headersNamed(pre.headers, 'access-control-')).toEqual([]);
      const get = await send(withCors.port, 'GET', '/v1/units', { ...auth(), origin });
      expect(get.status).toBe(200);
      expect(headersNamed(get.headers, 'access-control-')).toEqual([]);
      expect(get.headers.vary).toBe('Origin');
    }
  });

  it('the HTTP backend has no CORS even for a listed origin (browsers have no business there)', async () => {
    const pre = await send(withCors.port, 'OPTIONS', '/v1/backend/hyg/app', {
      origin: CONSOLE,
      'access-control-request-method': 'GET',
    });
    const get = await send(withCors.port, 'GET', '/v1/backend/hyg/app', {
      ...auth(),
      origin: CONSOLE,
    });
    expect(pre.status).not.toBe(204);
    for (const r of [pre, get]) expect(headersNamed(r.headers, 'access-control-')).toEqual([]);
  });

  it('a bad STATEHOUSE_CORS_ORIGINS stops the start naming the variable and each bad entry', async () => {
    const fresh = await freshServerEnv();
    try {
      // A server that starts after all is stopped again, and the test fails.
      const output = await spawnServer(
        {
          ...fresh.env,
          STATEHOUSE_CORS_ORIGINS: `${CONSOLE},*,https://*.example.com,${CONSOLE}/app,ftp://files.example.com,null`,
        },
        { waitReady: false },
      ).then(
        async (s) => {
          await s.stop();
          return 'it started';
        },
        (e: Error) => e.message,
      );
      expect(output).toMatch(/^server exited with 2/);
      for (const bad of ['"*"', 'https://*.example.com', `${CONSOLE}/app`, 'ftp://', '"null"'])
        expect(output).toContain(bad);
      expect(output.match(/STATEHOUSE_CORS_ORIGINS: /g)?.length).toBe(5);
    } finally {
      await fresh.cleanup();
    }
  });
});

describe('no version of the server or its platform in any answer', () => {
  /** Versions someone could look up vulnerabilities by: the server's and what it runs on. */
  function versions(): string[] {
    const v = (pkg: string) =>
      (
        JSON.parse(readFileSync(join(ROOT, 'node_modules', pkg, 'package.json'), 'utf8')) as {
          version: string;
        }
      ).version;
    const node = execFileSync(NODE, ['-p', 'process.versions.node']).toString().trim();
    const own = (
      JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }
    ).version;
    return [
      node,
      own,
      v('express'),
      v('@nestjs/core'),
      v('@nestjs/platform-express'),
      v('@nestjs/swagger'),
      v('swagger-ui-dist'),
      v('helmet'),
      v('typeorm'),
    ];
  }

  /** Node's own answer to a request its parser refuses (no route or middleware sees it). */
  function malformed(port: number): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () =>
        socket.end('GET / HTTP/1.1\r\nBad header\r\n\r\n'),
      );
      let got = '';
      socket.on('data', (d: Buffer) => (got += d.toString()));
      socket.on('end', () => resolve(got));
      socket.on('error', reject);
    });
  }

  it('no Server or X-Powered-By header and no version in any header or error page, on every door', async () => {
    const p = withCors.port;
    const s3Port = withCors.s3Port as number;
    /** Swagger UI's own scripts and styles: third-party files, shown only for their headers. */
    const headersOnly = new Set([
      '/docs/swagger-ui-bundle.js',
      '/docs/swagger-ui-standalone-preset.js',
      '/docs/swagger-ui.css',
      '/docs/favicon-32x32.png',
    ]);
    const probes: [number, string, string][] = [
      [p, 'GET', '/healthz'],
      [p, 'GET', '/readyz'],
      [p, 'GET', '/v1/units'],
      [p, 'GET', '/v1/nothing-here'],
      [p, 'HEAD', '/v1/nothing-here'],
      [p, 'DELETE', '/docs'],
      [p, 'GET', '/%ZZ'],
      [p, 'OPTIONS', '/v1/units'],
      [p, 'GET', '/docs'],
      [p, 'GET', '/docs/swagger-ui-init.js'],
      ...[...headersOnly].map((path): [number, string, string] => [p, 'GET', path]),
      [p, 'GET', '/docs/package.json'],
      [p, 'GET', '/docs/package%2ejson'],
      [p, 'GET', '/docs/README.md'],
      [p, 'GET', '/docs/LICENSE'],
      [p, 'GET', '/docs/nothing.js'],
      [p, 'GET', '/docs/swagger-ui-bundle.js.map'],
      [p, 'GET', '/docs/openapi.json'],
      [p, 'GET', '/v1/backend/team/app'],
      [p, 'GET', '/v1/backend/%ZZ'],
      [p, 'GET', '/s3'],
      [p, 'GET', '/s3/tfstate/x'],
      [p, 'GET', '/s3/%ZZ'],
      [s3Port, 'GET', '/'],
      [s3Port, 'GET', '/tfstate/x'],
      [s3Port, 'GET', '/v1/nothing-here'],
      [s3Port, 'OPTIONS', '*'],
    ];
    const found = versions();
    const product =
      /\b(express|nest(js)?|node(\.js)?|helmet|swagger|typeorm|pglite|statehouse\/)\b/i;
    const leaks: string[] = [];
    for (const [port, method, target] of probes) {
      const r = await send(port, method, target);
      const where = `${method} ${target} on ${port === p ? 'PORT' : 'STATEHOUSE_S3_PORT'}`;
      for (const name of ['server', 'x-powered-by', 'x-aspnet-version', 'via'])
        if (r.headers[name] !== undefined) leaks.push(`${where}: ${name} header`);
      for (const [name, value] of Object.entries(r.headers)) {
        const text = [value].flat().join(', ');
        if (product.test(text) || found.some((v) => text.includes(v)))
          leaks.push(`${where}: ${name}: ${text}`);
      }
      const path = target.split('?')[0];
      if (!headersOnly.has(path)) {
        for (const v of found) if (r.text.includes(v)) leaks.push(`${where}: body has ${v}`);
      }
    }
    for (const port of [p, s3Port]) {
      const answer = await malformed(port);
      expect(answer).toMatch(/^HTTP\/1\.1 400 /);
      if (/^server:/im.test(answer) || found.some((v) => answer.includes(v)))
        leaks.push(`parser refusal on ${port}: ${answer}`);
    }
    expect(leaks).toEqual([]);
  });
});

describe('Swagger UI in a browser', () => {
  /** A name other than localhost: the page is reached as it is in production, over plain http. */
  const HOST = 'statehouse.test';

  it('/docs renders its operations under its Content-Security-Policy in headless Chromium, with no CSP violation, and "Try it out" reaches the API', async () => {
    if (!existsSync(CHROMIUM)) {
      throw new Error(
        `Chromium is not installed at ${CHROMIUM}: this test needs it (Debian: apt-get install -y chromium; CI=true .ci/run installs it)`,
      );
    }
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [`--host-resolver-rules=MAP ${HOST} 127.0.0.1`, '--no-proxy-server'],
    });
    try {
      const page = await browser.newPage();
      const origin = `http://${HOST}:${withCors.port}`;
      const csp: string[] = [];
      const errors: string[] = [];
      const failed: string[] = [];
      const foreign: string[] = [];
      page.on('console', (m) => {
        if (/content.security.policy/i.test(m.text())) csp.push(m.text());
      });
      page.on('pageerror', (e) => errors.push(e.message));
      page.on('requestfailed', (r) => failed.push(`${r.url()}: ${r.failure()?.errorText}`));
      page.on('request', (r) => {
        if (!r.url().startsWith(`${origin}/`) && !r.url().startsWith('data:'))
          foreign.push(r.url());
      });
      // Every violation the page sees, also of policies the console does not report.
      await page.addInitScript({
        content: `window.__csp = []; document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));`,
      });

      const response = await page.goto(`${origin}/docs`);
      expect(response?.status()).toBe(200);
      expect(response?.headers()['content-security-policy']).toBe(DOCS_CSP);
      // What the page did is reported with what it saw go wrong, not as a bare timeout.
      const steps: string[] = [];
      const step = async (name: string, act: () => Promise<void>): Promise<void> => {
        if (steps.length > 0) return; // an earlier step failed
        await act().catch((e: Error) => steps.push(`${name}: ${e.message.split('\n')[0]}`));
      };
      const visible = (selector: string) => () =>
        page.locator(selector).waitFor({ state: 'visible', timeout: 20_000 });
      await step('operations rendered', visible('#operations-units-Units_list'));
      await step('a write operation rendered', visible('#operations-units-Units_putState'));
      // "Try it out" on GET /healthz: the page's own request to the API (connect-src 'self').
      const health = page.locator('#operations-health-Health_healthz');
      await step('open GET /healthz', () => health.locator('.opblock-summary').click());
      await step('Try it out', () => health.getByRole('button', { name: 'Try it out' }).click());
      await step('Execute', () => health.getByRole('button', { name: 'Execute' }).click());
      await step('200 shown', () =>
        health
          .locator('.live-responses-table .response-col_status', { hasText: '200' })
          .waitFor({ state: 'visible', timeout: 20_000 }),
      );

      expect({
        steps,
        violations: await page.evaluate('window.__csp'),
        csp,
        errors,
        failed,
        foreign,
      }).toEqual({ steps: [], violations: [], csp: [], errors: [], failed: [], foreign: [] });
    } finally {
      await browser.close();
    }
  });
});
