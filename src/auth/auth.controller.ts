import {
  Body,
  Controller,
  Delete,
  Get,
  HttpCode,
  Inject,
  Param,
  Post,
  UseGuards,
} from '@nestjs/common';
import {
  ApiBearerAuth,
  ApiCreatedResponse,
  ApiForbiddenResponse,
  ApiNoContentResponse,
  ApiOkResponse,
  ApiOperation,
  ApiTags,
  ApiTooManyRequestsResponse,
  ApiUnauthorizedResponse,
} from '@nestjs/swagger';
import { ThrottlerGuard } from '@nestjs/throttler';
import { AuditService } from '../audit/audit.service';
import { APP_CONFIG, AppConfig } from '../config/config';
import { DomainError } from '../common/errors';
import { AuthorizationService } from '../rbac/authorization.service';
import { CurrentPrincipal, Public } from '../common/route-auth';
import { BootstrapTokenService } from './bootstrap-token.service';
import {
  ApiTokenView,
  AuthConfigView,
  CreateApiTokenDto,
  CreatedApiTokenView,
  ExchangeDto,
  MeView,
  ProcessCredentialsView,
  RefreshDto,
  TokenResponseView,
} from './dto/auth.dto';
import { OidcService } from './oidc/oidc.service';
import type { Principal } from '../common/principal';
import { StsService } from './sts/sts.service';
import { ApiTokenService } from './tokens/api-token.service';
import { TokenService } from './tokens/token.service';

@ApiTags('auth')
@Controller('v1/auth')
export class AuthController {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly bootstrap: BootstrapTokenService,
    private readonly authz: AuthorizationService,
    private readonly oidc: OidcService,
    private readonly tokens: TokenService,
    private readonly apiTokens: ApiTokenService,
    private readonly sts: StsService,
    private readonly audit: AuditService,
  ) {}

  @Public()
  @Get('config')
  @ApiOperation({
    summary: 'How clients log in: the OpenID issuer, the CLI’s public client id and scopes',
  })
  @ApiOkResponse({ type: AuthConfigView })
  authConfig(): AuthConfigView {
    const oidc = this.config.oidc;
    return {
      issuer: oidc?.issuer ?? null,
      client_id: oidc?.clientId ?? null,
      scopes: oidc?.scopes ?? [],
      public_url: this.config.publicUrl,
    };
  }

  @Public()
  @UseGuards(ThrottlerGuard)
  @Post('exchange')
  @HttpCode(200)
  @ApiOperation({
    summary: 'Exchange an ID token from the OpenID provider for an access and a refresh token',
    description:
      'The ID token is verified against the provider’s discovery document and JWKS (signature, iss, aud = client id, exp, nonce when sent).',
  })
  @ApiOkResponse({ type: TokenResponseView })
  @ApiUnauthorizedResponse({
    description: 'The ID token was refused; the message says which check failed',
  })
  @ApiTooManyRequestsResponse()
  async exchange(@Body() dto: ExchangeDto): Promise<TokenResponseView> {
    const identity = await this.audited('exchange', () =>
      this.oidc.verifyIdToken(dto.id_token, dto.nonce),
    );
    this.audit.record({
      type: 'auth.login',
      actor: identity.subject,
      outcome: 'success',
      details: { via: 'oidc' },
    });
    return this.tokens.startSession(identity);
  }

  @Public()
  @UseGuards(ThrottlerGuard)
  @Post('token')
  @HttpCode(200)
  @ApiOperation({ summary: 'Rotate a refresh token: a new access token and a new refresh token' })
  @ApiOkResponse({ type: TokenResponseView })
  @ApiUnauthorizedResponse({
    description: 'Unknown, expired, revoked or reused refresh token (reuse revokes the session)',
  })
  @ApiTooManyRequestsResponse()
  refresh(@Body() dto: RefreshDto): Promise<TokenResponseView> {
    return this.audited('token', () => this.tokens.refresh(dto.refresh_token));
  }

  /** Public login routes bypass the guard, so they record their own refusals (never the secret). */
  private async audited<T>(endpoint: string, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (e) {
      if (e instanceof DomainError && e.code === 'unauthenticated') {
        this.audit.record({
          type: 'auth.failed',
          actor: 'anonymous',
          outcome: 'denied',
          details: { endpoint, reason: e.message },
        });
      }
      throw e;
    }
  }

  @Public()
  @UseGuards(ThrottlerGuard)
  @Post('logout')
  @HttpCode(204)
  @ApiOperation({ summary: 'End the login session the refresh token belongs to' })
  @ApiNoContentResponse()
  async logout(@Body() dto: RefreshDto): Promise<void> {
    await this.tokens.logout(dto.refresh_token);
  }

  @ApiBearerAuth()
  @Post('issue-s3-creds')
  @HttpCode(200)
  @ApiOperation({
    summary: 'Short-lived S3 credentials for the caller (AWS credential_process JSON)',
    description:
      'For Terraform’s S3 backend and the AWS CLI through `statehouse creds --json`. The credentials name the API token or login session of the caller, stop working when it is revoked (or logged out), and never outlive it. bootstrap-admin gets none (403): create an API token first.',
  })
  @ApiOkResponse({ type: ProcessCredentialsView })
  @ApiForbiddenResponse({ description: 'The caller is bootstrap-admin' })
  issueS3Creds(@CurrentPrincipal() principal: Principal): Promise<ProcessCredentialsView> {
    return this.sts.issue(principal);
  }

  @ApiBearerAuth()
  @Get('me')
  @ApiOperation({ summary: 'Who the caller is' })
  @ApiOkResponse({ type: MeView })
  me(@CurrentPrincipal() principal: Principal): MeView {
    const { subject, kind, via, email, groups } = principal;
    return { subject, kind, via, ...(email ? { email } : {}), ...(groups ? { groups } : {}) };
  }

  @ApiBearerAuth()
  @UseGuards(ThrottlerGuard)
  @Post('tokens')
  @ApiOperation({
    summary: 'Create an API token (the secret is shown only in this answer)',
    description:
      'Acts as the caller, or as a service principal `svc:<name>` (needs `token.manage`; before RBAC is initialised, bootstrap-admin).',
  })
  @ApiCreatedResponse({ type: CreatedApiTokenView })
  createToken(
    @Body() dto: CreateApiTokenDto,
    @CurrentPrincipal() principal: Principal,
  ): Promise<CreatedApiTokenView> {
    return this.apiTokens.create(principal, {
      name: dto.name,
      subject: dto.subject,
      expiresAt: dto.expiresAt ? new Date(dto.expiresAt) : undefined,
    });
  }

  @ApiBearerAuth()
  @Get('tokens')
  @ApiOperation({ summary: 'List API tokens: yours, or all with token.manage (never the secrets)' })
  @ApiOkResponse({ type: [ApiTokenView] })
  listTokens(@CurrentPrincipal() principal: Principal): Promise<ApiTokenView[]> {
    return this.apiTokens.list(principal);
  }

  @ApiBearerAuth()
  @Delete('tokens/:id')
  @HttpCode(204)
  @ApiOperation({ summary: 'Revoke an API token' })
  @ApiNoContentResponse()
  async revokeToken(
    @Param('id') id: string,
    @CurrentPrincipal() principal: Principal,
  ): Promise<void> {
    await this.apiTokens.revoke(principal, id);
  }

  @ApiBearerAuth()
  @Delete('bootstrap')
  @HttpCode(204)
  @ApiOperation({
    summary: 'Disable the generated bootstrap token',
    description:
      'Stops the token generated on first start from authenticating. A token configured with STATEHOUSE_BOOTSTRAP_TOKEN is removed from the environment instead.',
  })
  @ApiNoContentResponse()
  async disableBootstrap(@CurrentPrincipal() principal: Principal): Promise<void> {
    await this.authz.authorize(principal, 'rbac.manage', { unit: '*' });
    await this.bootstrap.disableGenerated(principal.subject);
  }
}
