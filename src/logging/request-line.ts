import type { IncomingMessage, ServerResponse } from 'node:http';
import pino from 'pino';
import type { Options } from 'pino-http';
import type { AppConfig } from '../config/config';
import { logDestination } from './log-output';
import { loggerParams, withLineAudit } from './logging';

/** Writes the one line of a request once its connection is done with it (`res` 'close'). */
export type RequestLineWriter = (
  req: IncomingMessage,
  res: ServerResponse,
  startedAt: number,
) => void;

/**
 * The line pino-http writes for a request, for the routes served below Express (`LeanRoute`):
 * the same fields, level, message, serializers and redaction — and the security event the
 * request carries — from one logger made once, where pino-http makes two child loggers per
 * request.
 */
export function requestLineWriter(config: AppConfig): RequestLineWriter {
  const o = loggerParams(config).pinoHttp as Options;
  const logger = pino(
    { level: o.level, serializers: o.serializers, redact: o.redact, hooks: o.hooks },
    logDestination(config),
  );
  return (req, res, startedAt) => {
    const responseTime = Date.now() - startedAt;
    const fields = { req, service: 'statehouse', res, responseTime };
    if (res.statusCode >= 500) {
      const err = new Error(`failed with status code ${res.statusCode}`);
      logger.error(withLineAudit(req, { ...fields, err }), 'request errored');
      return;
    }
    const done = !req.readableAborted && res.writableEnded;
    logger.info(withLineAudit(req, fields), done ? 'request completed' : 'request aborted');
  };
}
