import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Params } from 'nestjs-pino';
import type { AppConfig } from '../config/config';
import { errorForLog } from '../common/error-log';
import { requestLineOf } from '../common/request-context';

/**
 * Query parameters whose values are credentials: presigned S3 URLs, tokens, the TFE door's
 * upload capability, and `terraform login`'s codes and the state that names a sign-in.
 */
const SECRET_PARAMS =
  /^(x-amz-signature|x-amz-credential|x-amz-security-token|signature|token|access_token|refresh_token|password|id_token|code|capability|state)$/i;

/** The URL as it may be logged: secret query values replaced by `[redacted]`. */
export function redactUrl(url: string | undefined): string | undefined {
  if (url === undefined) return undefined;
  const q = url.indexOf('?');
  if (q < 0) return url;
  const parts = url
    .slice(q + 1)
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      const rawName = eq < 0 ? pair : pair.slice(0, eq);
      let name = rawName;
      try {
        name = decodeURIComponent(rawName);
      } catch {
        // keep the raw name
      }
      return eq >= 0 && SECRET_PARAMS.test(name) ? `${rawName}=[redacted]` : pair;
    });
  return `${url.slice(0, q)}?${parts.join('&')}`;
}

/** A request's line as pino-http makes it, with the security event it carries (if any). */
export function withLineAudit(req: IncomingMessage, val: object): object {
  const line = requestLineOf(req);
  if (!line) return val;
  line.written = true;
  return line.audit === undefined ? val : { ...val, audit: line.audit };
}

/**
 * Structured JSON logs with a request id on every line. Requests are logged without headers
 * (no Authorization, no cookies) and with credential query parameters redacted; bodies never.
 * Every error goes through `errorForLog` (log errors as `{ err }`): code, constraint, table,
 * column and the message without quoted literals, never what the error was carrying.
 */
export function loggerParams(config: AppConfig): Params {
  return {
    pinoHttp: {
      level: config.logLevel,
      genReqId: (req: IncomingMessage) => (req as IncomingMessage & { id: string }).id,
      customProps: () => ({ service: 'statehouse' }),
      customLogLevel: (_req: IncomingMessage, res: ServerResponse, err?: Error) =>
        err || res.statusCode >= 500 ? 'error' : 'info',
      customSuccessObject: (req: IncomingMessage, _res: ServerResponse, val: object) =>
        withLineAudit(req, val),
      customErrorObject: (req: IncomingMessage, _res: ServerResponse, _e: Error, val: object) =>
        withLineAudit(req, val),
      autoLogging: {
        ignore: (req: IncomingMessage) => req.url === '/healthz' || req.url === '/readyz',
      },
      redact: {
        paths: [
          'req.headers.authorization',
          'req.headers.cookie',
          'req.headers["x-amz-security-token"]',
          'res.headers["set-cookie"]',
          'err.config',
        ],
        censor: '[redacted]',
      },
      hooks: {
        // pino makes an error's raw message the line's `msg` when none is given: the
        // serializer's stripped message instead.
        logMethod(args, method) {
          const [first, second] = args as unknown[];
          if (typeof second !== 'string' && typeof first === 'object' && first !== null) {
            const holder = first as { err?: unknown; msg?: unknown };
            const err =
              first instanceof Error ? first : holder.msg === undefined ? holder.err : undefined;
            if (err !== undefined) {
              const obj = first instanceof Error ? { err: first } : first;
              return method.apply(this, [obj, errorForLog(err).message, ...args.slice(1)] as never);
            }
          }
          return method.apply(this, args);
        },
      },
      serializers: {
        err: errorForLog,
        req: (req: IncomingMessage & { id?: string; raw?: IncomingMessage }) => {
          const raw = req.raw ?? req;
          return {
            id: req.id,
            method: raw.method,
            url: redactUrl(
              (raw as IncomingMessage & { originalUrl?: string }).originalUrl ?? raw.url,
            ),
            userAgent: raw.headers['user-agent'],
            contentLength: raw.headers['content-length'],
          };
        },
        res: (res: ServerResponse) => ({ statusCode: res.statusCode }),
      },
    },
  };
}
