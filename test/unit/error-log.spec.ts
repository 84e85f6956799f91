/**
 * The one error serializer (src/common/error-log.ts), alone and as pino's `err` serializer in
 * the real logger configuration: a database error that carries a state's content — in the
 * query, its parameters, PostgreSQL's detail and where, the driver's error, a quoted literal in
 * the message, a cause — is logged with its code, constraint, table and column only.
 */
import { pinoHttp, Options } from 'pino-http';
import { QueryFailedError } from 'typeorm';
import { loadConfig } from '../../src/config/config';
import { errorForLog, withoutQuotedLiterals } from '../../src/common/error-log';
import { loggerParams } from '../../src/logging/logging';

const MARKER = 'state-marker-7d1c0e5a-91b4';

/** A PostgreSQL error as `pg` raises it, wrapped by TypeORM, carrying MARKER everywhere. */
function queryFailed(message: string, fields: Record<string, string>): QueryFailedError {
  const driverError = Object.assign(new Error(message), {
    severity: 'ERROR',
    detail: `Failing row contains (1, {"db_password": "${MARKER}"}).`,
    where: `JSON data, line 1: ${MARKER}`,
    hint: `check "${MARKER}"`,
    schema: 'public',
    ...fields,
  });
  return new QueryFailedError(
    `INSERT INTO versions (outputs) VALUES ('${MARKER}')`,
    [`{"db_password":{"value":"${MARKER}","sensitive":true}}`, Buffer.from(MARKER.repeat(1000))],
    driverError,
  );
}

function logWithRealConfig(obj: Record<string, unknown>): string {
  const lines: string[] = [];
  const pinoOptions = loggerParams(loadConfig({})).pinoHttp as Options;
  const { logger } = pinoHttp({ ...pinoOptions }, { write: (line: string) => lines.push(line) });
  logger.error(obj, 'unexpected error');
  expect(lines).toHaveLength(1);
  return lines[0];
}

describe('errorForLog', () => {
  it('keeps the SQLSTATE, constraint, table and column of a database error, and nothing it carries', () => {
    const e = queryFailed('new row for relation "versions" violates check constraint "ck_x"', {
      code: '23514',
      constraint: 'ck_x',
      table: 'versions',
      column: 'outputs',
    });
    const logged = errorForLog(e);
    expect(logged).toMatchObject({
      type: 'QueryFailedError',
      code: '23514',
      constraint: 'ck_x',
      table: 'versions',
      column: 'outputs',
      // From the first quote to the last: the names are in their own fields.
      message: 'new row for relation "…"',
    });
    expect(Object.keys(logged).sort()).toEqual(
      ['code', 'column', 'constraint', 'message', 'stack', 'table', 'type'].sort(),
    );
    expect(JSON.stringify(logged)).not.toContain(MARKER);
    expect(logged.stack).toMatch(/^\s+at /);
  });

  it('through the real logger configuration, a database error line holds no marker and stays small', () => {
    const e = queryFailed(`invalid input syntax for type uuid: "${MARKER}"`, {
      code: '22P02',
      table: 'versions',
    });
    const line = logWithRealConfig({ err: e, requestId: 'r-1' });
    expect(line).not.toContain(MARKER);
    expect(line.length).toBeLessThan(4000);
    const entry = JSON.parse(line) as { err: Record<string, unknown>; requestId: string };
    expect(entry.requestId).toBe('r-1');
    expect(entry.err).toMatchObject({ code: '22P02', table: 'versions' });
    for (const key of ['query', 'parameters', 'driverError', 'detail', 'where', 'hint']) {
      expect(entry.err).not.toHaveProperty(key);
    }
  });

  it('an error logged as the first argument goes through the same serializer', () => {
    const lines: string[] = [];
    const pinoOptions = loggerParams(loadConfig({})).pinoHttp as Options;
    const { logger } = pinoHttp({ ...pinoOptions }, { write: (line: string) => lines.push(line) });
    logger.error(queryFailed(`duplicate key "${MARKER}"`, { code: '23505' }));
    expect(lines[0]).not.toContain(MARKER);
    expect(lines[0]).toContain('23505');
  });

  it('serializes causes and aggregated errors the same way, and nothing else of them', () => {
    const inner = queryFailed(`value "${MARKER}"`, { code: '22021' });
    const outer = new Error(`write failed for "${MARKER}"`, { cause: inner });
    const aggregate = new AggregateError(
      [Object.assign(new Error(`connect ECONNREFUSED "${MARKER}"`), { code: 'ECONNREFUSED' })],
      '',
    );
    const logged = errorForLog(Object.assign(outer, { body: MARKER, extra: aggregate }));
    expect(logged.cause).toMatchObject({ type: 'QueryFailedError', code: '22021' });
    expect(JSON.stringify(logged)).not.toContain(MARKER);
    expect(errorForLog(aggregate).errors?.[0]).toMatchObject({ code: 'ECONNREFUSED' });
    expect(JSON.stringify(errorForLog(aggregate))).not.toContain(MARKER);
  });

  it('drops field values that are not identifiers (a value can never pose as a table name)', () => {
    const e = queryFailed('x', { code: '23505', table: `t ${MARKER} "x"`, column: MARKER + '!' });
    const logged = errorForLog(e);
    expect(logged.table).toBeUndefined();
    expect(logged.column).toBeUndefined();
  });

  it('describes thrown non-errors without their content beyond a stripped string', () => {
    expect(errorForLog(`oops "${MARKER}"`)).toEqual({ type: 'string', message: 'oops "…"' });
    expect(errorForLog(42)).toEqual({ type: 'number', message: 'a non-error value' });
    expect(JSON.stringify(errorForLog({ message: MARKER.length, data: MARKER }))).not.toContain(
      MARKER,
    );
  });
});

describe('withoutQuotedLiterals', () => {
  it.each([
    [`invalid input syntax for type uuid: "${MARKER}"`, 'invalid input syntax for type uuid: "…"'],
    [`invalid input value for enum door: "${MARKER}"`, 'invalid input value for enum door: "…"'],
    [
      'duplicate key value violates unique constraint "pk_units"',
      'duplicate key value violates unique constraint "…"',
    ],
    // V8's JSON.parse quotes the input, with the input's own quotes inside.
    [
      `Unexpected token 'x', "{"db_password": "${MARKER}"... is not valid JSON`,
      `Unexpected token '…', "…"... is not valid JSON`,
    ],
    // An unbalanced quote: the rest of the message may be the value.
    [`value too long near "${MARKER}`, 'value too long near "…'],
    [
      'could not connect: Connection terminated unexpectedly',
      'could not connect: Connection terminated unexpectedly',
    ],
    ["can't reach the database", "can't reach the database"],
    [
      'invalid byte sequence for encoding "UTF8": 0x00',
      'invalid byte sequence for encoding "…": 0x00',
    ],
  ])('%s → %s', (message, expected) => {
    expect(withoutQuotedLiterals(message)).toBe(expected);
  });

  it('caps the length of a message', () => {
    expect(withoutQuotedLiterals('x'.repeat(10_000)).length).toBeLessThanOrEqual(501);
  });
});
