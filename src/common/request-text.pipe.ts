import { ArgumentMetadata, Injectable, PipeTransform } from '@nestjs/common';
import { invalidRequest } from './errors';
import { findUnstorableText } from './text';

/** JSON request bodies of the management API are small documents; nothing needs more. */
export const MAX_REQUEST_JSON_DEPTH = 64;

/**
 * Global pipe, ahead of validation: every string a handler receives from a JSON body, the
 * query or the path (values and member names) must be text the database can store — no NUL,
 * no unpaired UTF-16 surrogate — and a body may not nest deeper than 64 levels (deeper ones
 * would exhaust the stack of the validation that follows). The refusal is a 400 naming the
 * field, before any handler runs, so no request string can reach PostgreSQL and fail there.
 */
@Injectable()
export class RequestTextPipe implements PipeTransform {
  transform(value: unknown, metadata: ArgumentMetadata): unknown {
    if (metadata.type === 'custom') return value; // principals and the like, not request text
    const where = metadata.type === 'body' ? 'body' : metadata.type === 'query' ? 'query' : 'path';
    const finding = findUnstorableText(value, MAX_REQUEST_JSON_DEPTH, metadata.data ?? '');
    if (!finding) return value;
    const field =
      finding.path === ''
        ? `the request ${where}`
        : where === 'body'
          ? `"${finding.path}"`
          : `${where} parameter "${finding.path}"`;
    if (finding.problem === 'nesting') {
      throw invalidRequest(
        `${field} nests arrays and objects deeper than ${MAX_REQUEST_JSON_DEPTH} levels`,
      );
    }
    throw invalidRequest(
      `${field} contains ${finding.problem}, which is not allowed in request strings`,
    );
  }
}
