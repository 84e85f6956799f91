import { NotFoundException } from '@nestjs/common';
import type { NestExpressApplication } from '@nestjs/platform-express';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import helmet from 'helmet';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { S3_PREFIX } from './s3compat/s3-request';
import { corsAnswer } from './common/cors';
import { DomainError } from './common/errors';
import { TFP_API_VERSION } from './tfe/jsonapi';

/**
 * Which part of the server a request is for, as far as answer headers go. Decided by Express
 * mounts at the doors' prefixes — the same matching that routes the request to the door (any
 * case, with or without a trailing slash) — never by a second pattern over the path.
 */
type Area = 's3' | 'backend' | 'tfe' | 'docs' | 'api';
const AREA = Symbol('statehouse.http-area');
type Marked = Request & { [AREA]?: Area };

/** Where Swagger UI is served (`SwaggerModule.setup` in server.ts). */
const DOCS_PATH = '/docs';

/**
 * The files below `/docs` that the Swagger UI page loads (and the page and spec themselves).
 * The rest of the `swagger-ui-dist` folder that Swagger's static middleware would serve —
 * `package.json` with its version, the README, source maps, a stock `index.html` and
 * initializer pointing at a demo API — answers `unknown_route` like any path without a route.
 */
const DOCS_FILES = new Set([
  '/',
  '/index.html',
  '/openapi.json',
  '/swagger-ui-init.js',
  '/swagger-ui.css',
  '/swagger-ui-bundle.js',
  '/swagger-ui-standalone-preset.js',
  '/favicon-32x32.png',
  '/favicon-16x16.png',
]);

const NONE = ["'none'"];
const SELF = ["'self'"];

/**
 * Headers every answer outside the S3 door carries (helmet): `nosniff`, no framing, no
 * referrer, no cross-origin opener or embedding, HSTS (browsers heed it over https only;
 * without `includeSubDomains`, which would bind every other host under the same domain).
 */
const common = {
  strictTransportSecurity: { maxAge: 365 * 24 * 3600, includeSubDomains: false },
  xFrameOptions: { action: 'deny' as const },
  referrerPolicy: { policy: 'no-referrer' as const },
};

/** The JSON API, the HTTP backend, errors: never a page, so nothing may load or run. */
const jsonHeaders = helmet({
  ...common,
  contentSecurityPolicy: {
    useDefaults: false,
    directives: { defaultSrc: NONE, baseUri: NONE, formAction: NONE, frameAncestors: NONE },
  },
});

/** One header change helmet makes to an answer: a header set, or one removed (`X-Powered-By`). */
type HeaderStep = { name: string; value: string | number | readonly string[] } | { name: string };

/**
 * What `middleware` does to every answer, recorded once on a stand-in answer: helmet's headers
 * with these options do not depend on the request (no nonces, no per-request directives). The
 * stand-in has nothing but `setHeader` and `removeHeader`, so a middleware that would read the
 * request or the answer fails here, at start, instead of being recorded wrong.
 */
function recordedSteps(middleware: typeof jsonHeaders): readonly HeaderStep[] {
  const steps: HeaderStep[] = [];
  const answer = {
    setHeader: (name: string, value: string | number | readonly string[]) => {
      steps.push({ name, value });
      return answer;
    },
    removeHeader: (name: string) => {
      steps.push({ name });
    },
  };
  let done = false;
  middleware({} as IncomingMessage, answer as unknown as ServerResponse, (err?: unknown) => {
    if (err !== undefined)
      throw err instanceof Error ? err : new Error('helmet refused its options');
    done = true;
  });
  if (!done) throw new Error('the HTTP backend headers could not be recorded');
  return steps;
}

/** The JSON API's headers as helmet sets them, recorded once (`recordedSteps`). */
const BACKEND_HEADER_STEPS = recordedSteps(jsonHeaders);

/**
 * The HTTP backend's headers, for its route served below Express (`withLeanRoutes`): the JSON
 * API's helmet headers, replayed from one recording instead of running helmet's middleware
 * chain on every request.
 */
export function setBackendHeaders(_req: IncomingMessage, res: ServerResponse): void {
  for (const step of BACKEND_HEADER_STEPS) {
    if ('value' in step) res.setHeader(step.name, step.value);
    else res.removeHeader(step.name);
  }
}

/**
 * Swagger UI's page: its scripts and styles from this server only ('unsafe-inline' styles: the
 * page has inline `<style>` blocks and Swagger UI's components set `style` attributes), images
 * and fonts also as `data:` URIs (its icons), requests ("Try it out") to this server only.
 * helmet's default policy is not used: its `upgrade-insecure-requests` breaks the page wherever
 * it is served over plain http under a name other than localhost.
 */
const docsHeaders = helmet({
  ...common,
  contentSecurityPolicy: {
    useDefaults: false,
    directives: {
      defaultSrc: NONE,
      scriptSrc: SELF,
      styleSrc: ["'self'", "'unsafe-inline'"],
      imgSrc: ["'self'", 'data:'],
      fontSrc: ["'self'", 'data:'],
      connectSrc: SELF,
      baseUri: NONE,
      formAction: NONE,
      frameAncestors: NONE,
    },
  },
});

/**
 * Security headers and CORS, mounted before everything that may answer (the doors' own
 * pre-routing refusals, the router, unknown routes, Swagger UI's files):
 * - the S3 door (`/s3`, and everything on the STATEHOUSE_S3_PORT listener, which reaches the
 *   application under `/s3`) gets none of it: it answers like S3;
 * - the HTTP backend gets the JSON API's headers (Terraform ignores them; a state opened in a
 *   browser is not rendered or sniffed) but no CORS: browsers have no business there;
 * - Swagger UI gets its own Content-Security-Policy and only its own files;
 * - the management API (everything else) gets the strict headers and, when
 *   STATEHOUSE_CORS_ORIGINS lists origins, CORS for them.
 */
export function useHttpHygiene(app: NestExpressApplication, corsOrigins: readonly string[]): void {
  app.use(S3_PREFIX, area('s3'));
  app.use('/v1/backend', area('backend'));
  app.use('/api/v2', area('tfe'));
  app.use(DOCS_PATH, area('docs'));
  app.use(hygiene(new Set(corsOrigins)));
  app.use(DOCS_PATH, docsFilesOnly);
}

/** Marks the requests below a mount as that area's (the first mount that matches wins). */
function area(name: Area): RequestHandler {
  return (req: Marked, _res: Response, next: NextFunction) => {
    req[AREA] ??= name;
    next();
  };
}

function docsFilesOnly(req: Request, _res: Response, next: NextFunction): void {
  if (DOCS_FILES.has(req.path)) return next();
  next(new NotFoundException());
}

function hygiene(corsOrigins: ReadonlySet<string>): RequestHandler {
  return (req: Marked, res: Response, next: NextFunction) => {
    const where = req[AREA] ?? 'api';
    if (where === 's3') return next();
    if (where === 'tfe') setTfeHeaders(res);
    (where === 'docs' ? docsHeaders : jsonHeaders)(req, res, (err?: unknown) => {
      if (err !== undefined || where === 'backend' || where === 'tfe') return next(err);
      const cors = corsAnswer(corsOrigins, {
        method: req.method,
        origin: req.headers.origin,
        requestMethod: req.headers['access-control-request-method'],
      });
      res.set(cors.headers);
      switch (cors.kind) {
        case 'continue':
          return next();
        case 'preflight':
          res.status(204).end();
          return;
        case 'refused':
          return next(
            new DomainError(
              'forbidden',
              `cross-origin requests from ${cors.origin.slice(0, 200)} are not allowed (STATEHOUSE_CORS_ORIGINS)`,
            ),
          );
      }
    });
  };
}

/**
 * What every answer of the TFE door carries: the API version Terraform's `cloud {}` block checks
 * (it refuses below 2.5), and the application's name Terraform shows in messages. No
 * `x-terraform-snapshot-interval`: Terraform then uploads one state at the end of an apply.
 */
function setTfeHeaders(res: Response): void {
  res.setHeader('TFP-API-Version', TFP_API_VERSION);
  res.setHeader('TFP-AppName', 'Statehouse');
  res.setHeader('X-TFE-Version', 'statehouse');
}
