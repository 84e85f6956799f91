/**
 * JSON:API as go-tfe reads it (hashicorp/jsonapi): resource objects, `Z` timestamps, error
 * documents and pagination meta. Pure functions, no Nest.
 */
import { DomainError } from '../common/errors';
import { textProblem } from '../common/text';

export const JSONAPI_MEDIA_TYPE = 'application/vnd.api+json';

/** The API version Terraform's `cloud {}` block requires (at least 2.5). */
export const TFP_API_VERSION = '2.5';

export interface ResourceObject {
  id: string;
  type: string;
  attributes?: Record<string, unknown>;
  relationships?: Record<string, { data: { id: string; type: string } | null | unknown[] }>;
  links?: Record<string, string>;
}

/** A time as go-tfe parses it: `2006-01-02T15:04:05Z` (whole seconds, a literal `Z`). */
export function tfeTime(d: Date | string | number): string {
  return new Date(d).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export interface PageRequest {
  number: number;
  size: number;
}

export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;

/** `page[number]` and `page[size]` from a query (1 and 20 by default, at most 100 a page). */
export function pageRequest(query: Record<string, unknown>): PageRequest {
  const read = (key: string, fallback: number, max: number): number => {
    const raw = query[key];
    if (raw === undefined || raw === '') return fallback;
    if (typeof raw !== 'string' || !/^\d{1,9}$/.test(raw) || Number(raw) < 1) {
      throw new DomainError('invalid_request', `${key} must be a whole number of at least 1`);
    }
    return Math.min(Number(raw), max);
  };
  return {
    number: read('page[number]', 1, 1_000_000),
    size: read('page[size]', DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE),
  };
}

/** One page of `items` and the pagination meta Terraform loops on. */
export function paged<T>(
  items: readonly T[],
  page: PageRequest,
): { items: T[]; meta: { pagination: Record<string, number | null> } } {
  const total = items.length;
  const totalPages = Math.max(1, Math.ceil(total / page.size));
  const start = (page.number - 1) * page.size;
  return {
    items: items.slice(start, start + page.size),
    meta: {
      pagination: {
        'current-page': page.number,
        'page-size': page.size,
        'prev-page': page.number > 1 ? page.number - 1 : null,
        'next-page': page.number < totalPages ? page.number + 1 : null,
        'total-pages': totalPages,
        'total-count': total,
      },
    },
  };
}

/** A JSON:API error document. */
export function errorDocument(
  status: number,
  title: string,
  detail: string,
): { errors: { status: string; title: string; detail: string }[] } {
  return { errors: [{ status: String(status), title, detail }] };
}

/** The `data` of a request document, checked to be an object (type checked when given). */
export interface RequestData {
  type?: string;
  attributes: Record<string, unknown>;
  relationships: Record<string, unknown>;
}

const MAX_DEPTH = 16;

/**
 * Parses a JSON:API request body. Attributes this server does not know pass through (clients
 * send more than is read); the shape around them is checked, and text PostgreSQL cannot hold
 * (NUL, lone surrogates) is refused anywhere in it.
 */
export function readDocument(body: Buffer, expectedType?: string): RequestData {
  const text = body.toString('utf8');
  let doc: unknown;
  try {
    doc = text.trim() === '' ? {} : JSON.parse(text);
  } catch {
    throw new DomainError('invalid_request', 'the request body is not valid JSON');
  }
  checkText(doc, 0);
  if (!isObject(doc))
    throw new DomainError('invalid_request', 'the request body must be a JSON object');
  const data = doc.data;
  if (!isObject(data)) {
    throw new DomainError('invalid_request', 'the request body has no "data" object');
  }
  if (data.type !== undefined && typeof data.type !== 'string') {
    throw new DomainError('invalid_request', '"data.type" must be a string');
  }
  // A lock request's data may name no type (go-tfe sends `"type": ""`).
  if (expectedType && data.type && data.type !== expectedType) {
    throw new DomainError(
      'invalid_request',
      `"data.type" must be "${expectedType}", not ${JSON.stringify(data.type).slice(0, 80)}`,
    );
  }
  const attributes = data.attributes ?? {};
  const relationships = data.relationships ?? {};
  if (!isObject(attributes))
    throw new DomainError('invalid_request', '"data.attributes" must be an object');
  if (!isObject(relationships)) {
    throw new DomainError('invalid_request', '"data.relationships" must be an object');
  }
  return { type: data.type, attributes, relationships };
}

/** An optional string attribute (undefined when absent or null). */
export function stringAttribute(
  attrs: Record<string, unknown>,
  name: string,
  max = 1024,
): string | undefined {
  const v = attrs[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw new DomainError('invalid_request', `"${name}" must be a string`);
  if (v.length > max) {
    throw new DomainError('invalid_request', `"${name}" is longer than ${max} characters`);
  }
  return v;
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function checkText(v: unknown, depth: number): void {
  if (depth > MAX_DEPTH) {
    throw new DomainError(
      'invalid_request',
      `the request body nests deeper than ${MAX_DEPTH} levels`,
    );
  }
  if (typeof v === 'string') {
    const problem = textProblem(v);
    if (problem) throw new DomainError('invalid_request', `the request body ${problem}`);
    return;
  }
  if (Array.isArray(v)) {
    for (const item of v) checkText(item, depth + 1);
    return;
  }
  if (isObject(v)) {
    for (const [k, item] of Object.entries(v)) {
      checkText(k, depth + 1);
      checkText(item, depth + 1);
    }
  }
}
