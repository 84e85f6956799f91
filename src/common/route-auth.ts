/**
 * The contract between every controller and the global auth guard (src/auth/auth.guard.ts):
 * the route markers the guard reads, and the parameter decorator that hands a handler the
 * principal the guard left on the request.
 */
import { createParamDecorator, ExecutionContext, SetMetadata } from '@nestjs/common';
import type { Request } from 'express';
import { DomainError } from './errors';
import { Principal, PRINCIPAL_KEY } from './principal';

export const IS_PUBLIC = 'statehouse:public';
export const ALLOW_BASIC_AUTH = 'statehouse:basic-auth';
export const SELF_AUTHENTICATED = 'statehouse:self-authenticated';

/** The only way to make a route answer without a principal (health, docs, JWKS, login). */
export const Public = (): MethodDecorator & ClassDecorator => SetMetadata(IS_PUBLIC, true);

/**
 * The route authenticates every request itself, in its door's own protocol (the S3 door's
 * SigV4 + session token). The global guard lets it through; the route must not answer
 * anything before its own check.
 */
export const SelfAuthenticated = (): MethodDecorator & ClassDecorator =>
  SetMetadata(SELF_AUTHENTICATED, true);

/** Accept HTTP basic auth (any non-empty user name, password = token), as Terraform's http backend sends it. */
export const AllowBasicAuth = (): MethodDecorator & ClassDecorator =>
  SetMetadata(ALLOW_BASIC_AUTH, true);

/** The authenticated caller. */
export const CurrentPrincipal = createParamDecorator((_: unknown, ctx: ExecutionContext) => {
  const req = ctx.switchToHttp().getRequest<Request & { [PRINCIPAL_KEY]?: Principal }>();
  const principal = req[PRINCIPAL_KEY];
  if (!principal) throw new DomainError('unauthenticated', 'authentication required');
  return principal;
});
