import {
  Inject,
  Injectable,
  Logger,
  Module,
  BeforeApplicationShutdown,
  OnModuleInit,
} from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { ThrottlerModule } from '@nestjs/throttler';
import { APP_CONFIG, AppConfig } from '../config/config';
import { AuthController } from './auth.controller';
import { AuthGuard, RequestAuthenticator } from './auth.guard';
import { BootstrapTokenService } from './bootstrap-token.service';
import { CREDENTIAL_VERIFIERS, CredentialVerifier } from './credential-verifier';
import { IdentityRepository } from './identity.repository';
import { JwksController } from './jwks.controller';
import { OidcService } from './oidc/oidc.service';
import { CredentialRevocations } from './revocation/credential-revocations.service';
import { RevocationRepository } from './revocation/revocation.repository';
import { StsService } from './sts/sts.service';
import { ApiTokenService } from './tokens/api-token.service';
import { SigningKeys } from './tokens/signing-keys.service';
import { TokenService } from './tokens/token.service';

/** With STATEHOUSE_AUTH_DISABLE, repeats the start-up warning every ten minutes. */
@Injectable()
class AuthDisabledWarning implements OnModuleInit, BeforeApplicationShutdown {
  private readonly logger = new Logger('auth');
  private timer?: NodeJS.Timeout;
  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}
  onModuleInit(): void {
    if (!this.config.authDisabled) return;
    const warn = () =>
      this.logger.warn(
        'authentication is DISABLED (STATEHOUSE_AUTH_DISABLE): every request is an anonymous admin',
      );
    this.timer = setInterval(warn, 10 * 60 * 1000);
    this.timer.unref();
  }
  beforeApplicationShutdown(): void {
    clearInterval(this.timer);
  }
}

@Module({
  imports: [
    ThrottlerModule.forRootAsync({
      inject: [APP_CONFIG],
      useFactory: (config: AppConfig) => [{ ttl: 60_000, limit: config.authRateLimitPerMinute }],
    }),
  ],
  controllers: [AuthController, JwksController],
  providers: [
    SigningKeys,
    IdentityRepository,
    RevocationRepository,
    CredentialRevocations,
    BootstrapTokenService,
    TokenService,
    ApiTokenService,
    OidcService,
    StsService,
    AuthDisabledWarning,
    {
      // Asked in this order; each recognises its own kind of secret by shape or prefix.
      provide: CREDENTIAL_VERIFIERS,
      useFactory: (...verifiers: CredentialVerifier[]) => verifiers,
      inject: [BootstrapTokenService, ApiTokenService, TokenService],
    },
    RequestAuthenticator,
    { provide: APP_GUARD, useClass: AuthGuard },
  ],
  exports: [
    // The sign-in rate limit, for the other doors' public sign-in routes (`terraform login`).
    ThrottlerModule,
    ApiTokenService,
    OidcService,
    CredentialRevocations,
    BootstrapTokenService,
    StsService,
    TokenService,
    SigningKeys,
    RequestAuthenticator,
  ],
})
export class AuthModule {}
