import { HttpException, NotFoundException } from '@nestjs/common';
import { presentedSecret } from '../../src/auth/auth.guard';
import { isUnavailable, toDomainError } from '../../src/common/error-mapping';
import { DomainError } from '../../src/common/errors';

const TOKEN = 'sh_at_0123456789abcdefghijklmnopqrstuvwxyz';
const basic = (userAndPassword: string): string =>
  `Basic ${Buffer.from(userAndPassword, 'utf8').toString('base64')}`;

describe('presentedSecret', () => {
  it('reads a Bearer token', () => {
    expect(presentedSecret(`Bearer ${TOKEN}`, false)).toBe(TOKEN);
  });

  it('reads the scheme case-insensitively and trims the token', () => {
    expect(presentedSecret(`bearer ${TOKEN}`, false)).toBe(TOKEN);
    expect(presentedSecret(`BEARER   ${TOKEN}  `, false)).toBe(TOKEN);
  });

  it('reads a Bearer token where basic auth is also allowed', () => {
    expect(presentedSecret(`Bearer ${TOKEN}`, true)).toBe(TOKEN);
  });

  it('reads the basic-auth password as the token where basic auth is allowed', () => {
    expect(presentedSecret(basic(`terraform:${TOKEN}`), true)).toBe(TOKEN);
  });

  it('ignores the basic-auth user name, whatever it is', () => {
    expect(presentedSecret(basic(`x:${TOKEN}`), true)).toBe(TOKEN);
    expect(presentedSecret(basic(`someone@example.com:${TOKEN}`), true)).toBe(TOKEN);
  });

  it('keeps colons inside the basic-auth password', () => {
    expect(presentedSecret(basic('terraform:part1:part2'), true)).toBe('part1:part2');
  });

  it('refuses basic auth where it is not allowed', () => {
    expect(presentedSecret(basic(`terraform:${TOKEN}`), false)).toBeUndefined();
  });

  it('refuses basic auth with an empty user name', () => {
    expect(presentedSecret(basic(`:${TOKEN}`), true)).toBeUndefined();
  });

  it('refuses basic auth with an empty password', () => {
    expect(presentedSecret(basic('terraform:'), true)).toBeUndefined();
  });

  it('refuses basic auth without a colon', () => {
    expect(presentedSecret(basic(`terraform${TOKEN}`), true)).toBeUndefined();
  });

  it.each([
    ['no header', undefined],
    ['an empty header', ''],
    ['a scheme alone', 'Bearer'],
    ['a Bearer scheme with only spaces', 'Bearer    '],
    ['a token without a scheme', TOKEN],
    ['an unknown scheme', `Token ${TOKEN}`],
    ['a Digest scheme', 'Digest username="a", response="b"'],
    ['an empty basic value', 'Basic '],
    ['a basic value that is not base64 of user:password', 'Basic !!!!'],
  ])('returns undefined for %s', (_label, header) => {
    expect(presentedSecret(header, true)).toBeUndefined();
    expect(presentedSecret(header, false)).toBeUndefined();
  });
});

describe('isUnavailable', () => {
  const withCode = (code: string, message = 'failed'): Error =>
    Object.assign(new Error(message), { code });

  it.each([
    'ECONNREFUSED',
    'ECONNRESET',
    'ETIMEDOUT',
    'ENOTFOUND',
    '57P01',
    '57P03',
    '53300',
    '08006',
  ])('recognises the connection error code %s', (code) => {
    expect(isUnavailable(withCode(code))).toBe(true);
  });

  it.each([
    'timeout exceeded when trying to connect',
    'Connection terminated unexpectedly',
    'Connection terminated due to connection timeout',
    'Client has encountered a connection error and is not queryable',
    'the database system is starting up',
    'the database system is shutting down',
  ])('recognises the pg message %j', (message) => {
    expect(isUnavailable(new Error(message))).toBe(true);
  });

  it("recognises a connection error nested as TypeORM's driverError", () => {
    const queryFailed = Object.assign(new Error('select failed'), {
      driverError: withCode('57P01', 'terminating connection due to administrator command'),
    });
    expect(isUnavailable(queryFailed)).toBe(true);
  });

  it('recognises a connection error nested as a cause', () => {
    const wrapped = new Error('could not load the state', {
      cause: new Error('timeout exceeded when trying to connect'),
    });
    expect(isUnavailable(wrapped)).toBe(true);
  });

  it.each([
    ['an ordinary error', new Error('boom')],
    ['a unique violation', withCode('23505', 'duplicate key value violates unique constraint')],
    ['a syntax error', withCode('42601', 'syntax error at or near "SELEC"')],
    [
      'a query error with an ordinary driverError',
      Object.assign(new Error('x'), { driverError: withCode('23503') }),
    ],
    ['a DomainError', new DomainError('invalid_request', 'bad')],
    ['a string', 'ECONNREFUSED'],
    ['null', null],
    ['undefined', undefined],
    ['a numeric code', Object.assign(new Error('x'), { code: 57 })],
  ])('does not treat %s as unavailable', (_label, error) => {
    expect(isUnavailable(error)).toBe(false);
  });
});

describe('toDomainError', () => {
  it('keeps a DomainError as it is', () => {
    const err = new DomainError('serial_conflict', 'serial 3 is older');
    expect(toDomainError(err)).toBe(err);
  });

  it("keeps Nest's own HttpExceptions as they are", () => {
    const err = new NotFoundException('no route');
    expect(toDomainError(err)).toBe(err);
  });

  it('maps an unknown error to internal without its message', () => {
    const mapped = toDomainError(new Error('password=hunter2 in the connection string'));
    expect(mapped).toBeInstanceOf(DomainError);
    expect((mapped as DomainError).code).toBe('internal');
    expect(mapped.message).not.toContain('hunter2');
  });

  it.each([
    ['a string', 'oops'],
    ['undefined', undefined],
    ['an object', { a: 1 }],
  ])('maps a thrown %s to internal', (_label, thrownValue) => {
    const mapped = toDomainError(thrownValue);
    expect(mapped).toBeInstanceOf(DomainError);
    expect((mapped as DomainError).code).toBe('internal');
  });

  it('maps a database connection error to unavailable', () => {
    const mapped = toDomainError(
      Object.assign(new Error('connect failed'), { code: 'ECONNREFUSED' }),
    );
    expect(mapped).toBeInstanceOf(DomainError);
    expect((mapped as DomainError).code).toBe('unavailable');
    expect(mapped).not.toBeInstanceOf(HttpException);
  });
});
