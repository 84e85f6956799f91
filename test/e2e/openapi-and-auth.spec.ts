import { MetadataScanner, NestFactory } from '@nestjs/core';
import type { NestContainer } from '@nestjs/core';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'node:http';
import { AppModule } from '../../src/app.module';
import { IS_PUBLIC, SELF_AUTHENTICATED } from '../../src/common/route-auth';
import { generateOpenApi } from '../../src/cli/openapi.command';
import { loadConfig } from '../../src/config/config';
import { ROOT } from '../support/paths';
import { onFreshServer, RunningServer } from '../support/server';

/** Routes that answer without a principal, on purpose. Anything else must demand one. */
const EXPECTED_PUBLIC = [
  'AuthController.authConfig',
  'AuthController.exchange',
  'AuthController.logout',
  'AuthController.refresh',
  // Terraform's service discovery, and the TFE door's ping (Terraform reads only its headers).
  'DiscoveryController.discovery',
  'HealthController.healthz',
  'HealthController.readyz',
  'JwksController.jwks',
  // Public unless STATEHOUSE_METRICS_TOKEN is set: then its own guard wants that token.
  'MetricsController.metricsText',
  // `terraform login`: each step is authenticated by the login's own secrets (the provider's
  // sign-in, the browser's cookie, the single-use code and Terraform's PKCE verifier).
  'TerraformLoginController.authorize',
  'TerraformLoginController.callback',
  'TerraformLoginController.token',
  'TfeController.ping',
  // Takes the TFE JSON state upload and drops it (nothing here reads it).
  'TfeController.uploadJson',
];

describe('the API contract', () => {
  let server: RunningServer;

  onFreshServer((started) => (server = started));

  it('the committed openapi/openapi.json equals what the app generates (run `npm run openapi`)', async () => {
    const committed = readFileSync(join(ROOT, 'openapi/openapi.json'), 'utf8');
    expect(await generateOpenApi()).toBe(committed);
  });

  it('the server serves the same document at /docs/openapi.json, and Swagger UI at /docs', async () => {
    const served: unknown = await (await fetch(`${server.url}/docs/openapi.json`)).json();
    expect(served).toEqual(JSON.parse(readFileSync(join(ROOT, 'openapi/openapi.json'), 'utf8')));
    const ui = await fetch(`${server.url}/docs`);
    expect(ui.status).toBe(200);
    expect(await ui.text()).toContain('swagger');
  });

  it('only the routes marked @Public() are public; only the S3 door authenticates itself', async () => {
    const app = await NestFactory.create(
      AppModule.forRoot(loadConfig({ NODE_ENV: 'test', STATEHOUSE_STORAGE: 'memory' })),
      { preview: true, logger: false },
    );
    // Preview mode builds the module graph without instantiating anything (no database).
    const container = (app as unknown as { container: NestContainer }).container;
    const scanner = new MetadataScanner();
    const publicRoutes: string[] = [];
    const selfAuthenticated: string[] = [];
    let routeCount = 0;
    const controllers = [...container.getModules().values()].flatMap((m) => [
      ...m.controllers.values(),
    ]);
    for (const wrapper of controllers) {
      const type = wrapper.metatype as (new (...a: unknown[]) => unknown) | undefined;
      if (!type) continue;
      for (const method of scanner.getAllMethodNames(type.prototype)) {
        const handler = (type.prototype as Record<string, unknown>)[method] as object;
        if (Reflect.getMetadata('path', handler) === undefined) continue;
        routeCount++;
        const isPublic =
          Reflect.getMetadata(IS_PUBLIC, handler) ?? Reflect.getMetadata(IS_PUBLIC, type);
        if (isPublic) publicRoutes.push(`${type.name}.${method}`);
        const selfAuth =
          Reflect.getMetadata(SELF_AUTHENTICATED, handler) ??
          Reflect.getMetadata(SELF_AUTHENTICATED, type);
        if (selfAuth) selfAuthenticated.push(`${type.name}.${method}`);
      }
    }
    await app.close();
    expect(routeCount).toBeGreaterThan(15);
    expect(publicRoutes.sort()).toEqual(EXPECTED_PUBLIC);
    // Routes that authenticate in their own protocol (the S3 door: SigV4; the TFE door's state
    // upload: the capability URL of one announced state version); tested in their suites.
    expect(selfAuthenticated.sort()).toEqual(['S3Controller.handle', 'TfeController.upload']);
  });

  it('every documented route and the http backend answer 401 without a token', async () => {
    const doc = JSON.parse(readFileSync(join(ROOT, 'openapi/openapi.json'), 'utf8')) as {
      paths: Record<string, Record<string, unknown>>;
    };
    const publicPaths = new Set([
      '/healthz',
      '/readyz',
      '/metrics',
      '/.well-known/jwks.json',
      '/v1/auth/config',
      '/v1/auth/exchange',
      '/v1/auth/token',
      '/v1/auth/logout',
    ]);
    const probes: [string, string][] = [];
    for (const [path, methods] of Object.entries(doc.paths)) {
      if (publicPaths.has(path)) continue;
      const concrete = path
        .replace('{name}', 'team%2Fapp')
        .replace('{version}', '1')
        .replace('{id}', '00000000-0000-0000-0000-000000000000');
      for (const m of Object.keys(methods)) probes.push([m.toUpperCase(), concrete]);
    }
    for (const m of ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'LOCK', 'UNLOCK'])
      probes.push([m, '/v1/backend/team/app']);
    expect(probes.length).toBeGreaterThan(20);
    for (const [method, path] of probes) {
      const status = await new Promise<number>((resolve, reject) => {
        const req = request(`${server.url}${path}`, { method }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        req.end();
      });
      expect(`${method} ${path} → ${status}`).toBe(`${method} ${path} → 401`);
    }
  });

  /** One request with a bearer token and a body; the status and the error code. */
  function probe(
    method: string,
    path: string,
    body?: string,
  ): Promise<{ status: number; code?: string; message?: string }> {
    return new Promise((resolve, reject) => {
      const req = request(
        `${server.url}${path}`,
        {
          method,
          headers: {
            ...server.auth,
            ...(body !== undefined
              ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }
              : {}),
          },
        },
        (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () => {
            let parsed: { code?: string; message?: string } = {};
            try {
              parsed = JSON.parse(text) as { code?: string; message?: string };
            } catch {
              // S3 XML or an empty body
            }
            resolve({ status: res.statusCode ?? 0, code: parsed.code, message: parsed.message });
          });
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  it('every route, spelled in upper case, with a trailing slash or with "//": the same handler reads the body the same way, or 400 unknown_route; never a 5xx, even on a malformed body', async () => {
    const doc = JSON.parse(readFileSync(join(ROOT, 'openapi/openapi.json'), 'utf8')) as {
      paths: Record<string, Record<string, unknown>>;
    };
    const routes: [string, string][] = [];
    for (const [path, methods] of Object.entries(doc.paths)) {
      const concrete = path
        .replace('{name}', 'walk%2Fapp')
        .replace('{version}', '1')
        .replace('{id}', '00000000-0000-0000-0000-000000000000');
      for (const m of Object.keys(methods)) {
        // Not these two: they would end the bootstrap token this walk runs with.
        if (path === '/v1/auth/bootstrap' || path === '/v1/auth/logout') continue;
        routes.push([m.toUpperCase(), concrete]);
      }
    }
    for (const m of ['GET', 'POST', 'PUT', 'DELETE', 'LOCK', 'UNLOCK'])
      routes.push([m, '/v1/backend/walk/app']);
    expect(routes.length).toBeGreaterThan(30);
    // Upper case for the route's own words; the unit name part keeps its spelling.
    const upper = (p: string) =>
      p
        .split('/')
        .map((s) => (s.includes('%') || s === 'walk' || s === 'app' ? s : s.toUpperCase()))
        .join('/');
    const malformed = '{"ID": "walk-lock", "version": 4,';
    const problems: string[] = [];
    for (const [method, path] of routes) {
      const canonical = await probe(method, path, malformed);
      if (canonical.status >= 500) problems.push(`${method} ${path} → ${canonical.status}`);
      for (const variant of [upper(path), `${path}/`]) {
        const r = await probe(method, variant, malformed);
        // Below /v1/backend the rest of the path is the unit's name, slashes included: a
        // trailing slash makes an empty segment, which no unit name has.
        const expected =
          variant.startsWith('/v1/backend/') && variant.endsWith('/')
            ? { status: 400, code: 'invalid_name' }
            : canonical;
        if (r.status !== expected.status || r.code !== expected.code)
          problems.push(
            `${method} ${variant} → ${r.status} ${r.code} (canonical: ${canonical.status} ${canonical.code})`,
          );
      }
      const doubled = path.replace(/^\/([^/]+)\//, '/$1//');
      const r = await probe(method, doubled, malformed);
      if (r.status >= 500 || (r.status === 404 && r.code !== 'state_not_found'))
        problems.push(`${method} ${doubled} → ${r.status} ${r.code}`);
      if (r.code === 'unknown_route' && !r.message?.includes(doubled))
        problems.push(`${method} ${doubled}: the refusal does not name the path`);
    }
    expect(problems).toEqual([]);
  });

  it('a path that matches no route answers 400 unknown_route naming it, never 404', async () => {
    for (const [method, path] of [
      ['GET', '/v1/backends/team/app'],
      ['POST', '/v1/backends/team/app'],
      ['GET', '/v1/unit'],
      ['GET', '/nowhere'],
      ['PATCH', '/v1/units'],
    ]) {
      const r = await probe(method, path);
      expect(`${method} ${path} → ${r.status} ${r.code}`).toBe(
        `${method} ${path} → 400 unknown_route`,
      );
      expect(r.message).toContain(`${method} ${path}`);
    }
    // A readable name without a state is still a 404 (Terraform: "no state yet").
    expect(await probe('GET', '/v1/backend/walk/none')).toMatchObject({ status: 404 });
  });
});
