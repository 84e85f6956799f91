/**
 * The one way an error reaches the log (pino's `err` serializer; see logging.ts). Database
 * errors carry what was sent to the database — TypeORM's `query` and `parameters` (a state's
 * outputs, 1 MiB of a blob chunk), PostgreSQL's `detail` ("Failing row contains (…)"), `where`,
 * the whole `driverError` — so only named fields are kept: the kind of error, its code
 * (SQLSTATE or a system code like ECONNRESET), the constraint, table and column it names, the
 * message with every quoted literal removed (PostgreSQL and V8 quote values inside messages:
 * `invalid input syntax for type uuid: "<value>"`), the stack frames, and the same of its
 * cause. Nothing else, whatever the error holds.
 */

export interface LoggedError {
  type: string;
  message: string;
  code?: string;
  constraint?: string;
  table?: string;
  column?: string;
  stack?: string;
  cause?: LoggedError;
  errors?: LoggedError[];
}

const MAX_MESSAGE = 500;
const MAX_FRAMES = 12;
const MAX_CAUSES = 3;
const MAX_AGGREGATED = 3;
const NAMED_FIELDS = ['code', 'constraint', 'table', 'column'] as const;
const FIELD_VALUE = /^[A-Za-z0-9_.$-]{1,128}$/;

/**
 * `message` with quoted literals replaced by `"…"`: for each quote character, everything from
 * its first occurrence to its last (nested and unbalanced quotes cannot let a value through),
 * and from an unmatched double quote to the end. A lone apostrophe ("can't") is kept.
 */
export function withoutQuotedLiterals(message: string): string {
  let m = message;
  for (const q of ['"', '`', "'"]) {
    const first = m.indexOf(q);
    if (first < 0) continue;
    const last = m.lastIndexOf(q);
    if (last > first) m = `${m.slice(0, first)}${q}…${q}${m.slice(last + 1)}`;
    else if (q !== "'") m = `${m.slice(0, first)}${q}…`;
  }
  return m.length > MAX_MESSAGE ? `${m.slice(0, MAX_MESSAGE)}…` : m;
}

function field(e: Record<string, unknown>, name: string): string | undefined {
  // TypeORM copies the driver's fields onto its error; look at the driver's error too.
  for (const src of [e, e.driverError as Record<string, unknown> | undefined]) {
    const v = src?.[name];
    if (typeof v === 'string' && FIELD_VALUE.test(v)) return v;
    if (typeof v === 'number' && name === 'code') return String(v);
  }
  return undefined;
}

function frames(stack: unknown): string | undefined {
  if (typeof stack !== 'string') return undefined;
  const lines = stack
    .split('\n')
    .filter((l) => /^\s+at /.test(l))
    .slice(0, MAX_FRAMES);
  return lines.length > 0 ? lines.join('\n') : undefined;
}

function typeOf(e: Record<string, unknown>): string {
  const ctor = (e as { constructor?: { name?: unknown } }).constructor?.name;
  if (typeof ctor === 'string' && ctor !== 'Object' && FIELD_VALUE.test(ctor)) return ctor;
  return typeof e.name === 'string' && FIELD_VALUE.test(e.name) ? e.name : 'Error';
}

/** The loggable description of anything thrown. */
export function errorForLog(thrown: unknown, depth = 0): LoggedError {
  if (typeof thrown !== 'object' || thrown === null) {
    return {
      type: typeof thrown,
      message: typeof thrown === 'string' ? withoutQuotedLiterals(thrown) : 'a non-error value',
    };
  }
  // pino-http hands serializers pino's own copy of the error, with the original as `raw`.
  const raw = (thrown as { raw?: unknown }).raw;
  const e = (typeof raw === 'object' && raw !== null ? raw : thrown) as Record<string, unknown>;
  const out: LoggedError = {
    type: typeOf(e),
    message: typeof e.message === 'string' ? withoutQuotedLiterals(e.message) : '',
  };
  for (const name of NAMED_FIELDS) {
    const v = field(e, name);
    if (v !== undefined) out[name] = v;
  }
  const stack = frames(e.stack);
  if (stack !== undefined) out.stack = stack;
  if (depth < MAX_CAUSES) {
    if (e.cause !== undefined) out.cause = errorForLog(e.cause, depth + 1);
    if (Array.isArray(e.errors) && e.errors.length > 0) {
      out.errors = e.errors.slice(0, MAX_AGGREGATED).map((x) => errorForLog(x, depth + 1));
    }
  }
  return out;
}
