import {
  ArgumentsHost,
  Catch,
  Controller,
  ExceptionFilter,
  Get,
  Inject,
  Post,
  Req,
  Res,
  UseFilters,
  UseGuards,
} from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import { ThrottlerGuard } from '@nestjs/throttler';
import type { Request, Response } from 'express';
import { APP_CONFIG, AppConfig } from '../config/config';
import { describeError } from '../common/api-exception.filter';
import { RawBody } from '../common/body-parsing';
import { DomainError } from '../common/errors';
import { readSmallBody } from '../common/raw-body';
import { Public } from '../common/route-auth';
import {
  bindingCookieName,
  LOGIN_PATHS,
  LoginPageError,
  OAuthError,
  TerraformLoginService,
} from './terraform-login.service';

/** A token request is a short form; anything bigger is not one. */
const MAX_TOKEN_FORM_BYTES = 16 * 1024;
const COOKIE_PATH = '/oauth/terraform';
const MAX_COOKIES = 64;

function queryOf(req: Request): URLSearchParams {
  const url = req.originalUrl ?? req.url;
  const at = url.indexOf('?');
  return new URLSearchParams(at < 0 ? '' : url.slice(at + 1));
}

function cookiesOf(req: Request): Map<string, string> {
  const cookies = new Map<string, string>();
  for (const part of (req.headers.cookie ?? '').split(';').slice(0, MAX_COOKIES)) {
    const eq = part.indexOf('=');
    if (eq > 0) cookies.set(part.slice(0, eq).trim(), part.slice(eq + 1).trim());
  }
  return cookies;
}

const escapeHtml = (text: string): string =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string,
  );

/** A refusal as a plain page: the person reading it is in the browser Terraform opened. */
function page(res: Response, e: LoginPageError): void {
  res
    .status(e.status)
    .set('Cache-Control', 'no-store')
    .type('text/html; charset=utf-8')
    .send(
      `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>Statehouse: terraform login</title></head>` +
        `<body><h1>terraform login did not complete</h1><p>${escapeHtml(e.message)}</p></body></html>\n`,
    );
}

/**
 * What reaches no handler's own refusal — the sign-in rate limit (its guard runs before the
 * handler), text the database cannot store, an outage — in the same forms: a page in the
 * browser, OAuth 2.0 JSON at the token endpoint.
 */
@Catch()
class TerraformLoginExceptionFilter implements ExceptionFilter {
  catch(exception: unknown, host: ArgumentsHost): void {
    const req = host.switchToHttp().getRequest<Request>();
    const res = host.switchToHttp().getResponse<Response>();
    const { status, body } = describeError(exception);
    if (res.headersSent) {
      res.destroy();
      return;
    }
    // The token endpoint is this controller's only POST route (matched however the path is cased).
    if (req.method !== 'POST') return page(res, new LoginPageError(status, body.message));
    const error =
      status === 429 || status === 503
        ? 'temporarily_unavailable'
        : status >= 500
          ? 'server_error'
          : 'invalid_request';
    res
      .status(status)
      .set('Cache-Control', 'no-store')
      .json({ error, error_description: body.message });
  }
}

/**
 * `terraform login` (login.v1, advertised in `/.well-known/terraform.json` when an OpenID
 * provider is configured): the browser steps (`authorize`, `callback`) answer redirects or a
 * page saying what went wrong; the token endpoint answers OAuth 2.0 JSON. Public: each step
 * is authenticated by the secrets of the login itself; rate-limited like the other sign-in
 * routes (STATEHOUSE_AUTH_RATE_LIMIT).
 */
@ApiExcludeController()
@Public()
@UseGuards(ThrottlerGuard)
@UseFilters(TerraformLoginExceptionFilter)
@Controller()
export class TerraformLoginController {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly login: TerraformLoginService,
  ) {}

  private cookie(name: string, value: string, maxAge: number): string {
    const secure = this.config.publicUrl.startsWith('https:') ? '; Secure' : '';
    return `${name}=${value}; Path=${COOKIE_PATH}; Max-Age=${maxAge}; HttpOnly; SameSite=Lax${secure}`;
  }

  @Get(LOGIN_PATHS.authorize)
  async authorize(@Req() req: Request, @Res() res: Response): Promise<void> {
    try {
      const { location, cookie } = await this.login.authorize(queryOf(req));
      res
        .status(302)
        .set('Cache-Control', 'no-store')
        .set('Location', location)
        .set('Set-Cookie', this.cookie(cookie.name, cookie.value, cookie.maxAge))
        .end();
    } catch (e) {
      if (e instanceof LoginPageError) return page(res, e);
      throw e;
    }
  }

  @Get(LOGIN_PATHS.callback)
  async callback(@Req() req: Request, @Res() res: Response): Promise<void> {
    const query = queryOf(req);
    try {
      const location = await this.login.callback(query, cookiesOf(req));
      const state = query.get('state') as string;
      res
        .status(302)
        .set('Cache-Control', 'no-store')
        .set('Location', location)
        .set('Set-Cookie', this.cookie(bindingCookieName(state), '', 0))
        .end();
    } catch (e) {
      if (e instanceof LoginPageError) return page(res, e);
      throw e;
    }
  }

  @RawBody()
  @Post(LOGIN_PATHS.token)
  async token(@Req() req: Request, @Res() res: Response): Promise<void> {
    res.set('Cache-Control', 'no-store').set('Pragma', 'no-cache');
    try {
      const type = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
      const body = await readSmallBody(req, MAX_TOKEN_FORM_BYTES).catch((e: unknown) => {
        if (e instanceof DomainError && e.code === 'too_large') {
          throw new OAuthError(413, 'invalid_request', e.message);
        }
        throw e;
      });
      if (type !== 'application/x-www-form-urlencoded') {
        throw new OAuthError(
          400,
          'invalid_request',
          'the token request is a form (Content-Type: application/x-www-form-urlencoded)',
        );
      }
      res.status(200).json(await this.login.token(new URLSearchParams(body.toString('utf8'))));
    } catch (e) {
      if (e instanceof OAuthError) {
        res.status(e.status).json({ error: e.error, error_description: e.message });
        return;
      }
      throw e;
    }
  }
}
