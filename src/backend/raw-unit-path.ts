import type { NextFunction, Request, Response } from 'express';
import { describeError, sendError } from '../common/api-exception.filter';
import { DomainError } from '../common/errors';

/**
 * Express middleware for `/v1/backend`, mounted before the router: Express decodes wildcard
 * parameters before any handler runs and fails on a malformed percent-encoding with its own
 * message. Unit paths are validated from the raw URL; this answers that one case the way
 * every other bad name is answered.
 */
export function rejectMalformedEncoding(req: Request, res: Response, next: NextFunction): void {
  const path = req.originalUrl.split('?')[0];
  try {
    for (const segment of path.split('/')) decodeURIComponent(segment);
  } catch {
    const { status, body } = describeError(
      new DomainError('invalid_name', 'unit name has a malformed percent-encoding'),
    );
    sendError(res, status, 'application/json', JSON.stringify(body));
    return;
  }
  next();
}
